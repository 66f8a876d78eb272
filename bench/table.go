package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// row is one line of the table: a value per path (direct, gateway, nginx;
// NaN when not measured).
type row struct {
	name   string
	unit   string
	v      [3]float64
	higher bool // higher is better (throughput); ratios read the same way either way
	note   string
}

// printTable prints rows as Markdown. Ratios are gateway/direct and
// gateway/nginx (nginx/direct in the nginx cell): above 1 means the gateway's
// number is larger, which is better for req/s and worse for everything else.
func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| measure | direct | gateway | gateway ÷ direct | nginx | nginx ÷ direct | gateway ÷ nginx | notes |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		d, g, n := r.v[0], r.v[1], r.v[2]
		cells := []string{r.name, num(d), num(g), ratio(g, d), num(n), ratio(n, d), ratio(g, n), r.note}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
}

// nan3 is a row's values before any is measured.
func nan3() [3]float64 { return [3]float64{math.NaN(), math.NaN(), math.NaN()} }

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
