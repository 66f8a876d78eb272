package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The rows measured by load generators we did not write (#17): wrk for
// HTTP/1.1 and h2load (nghttp2) for HTTP/2 over TLS, in interleaved rounds
// like httpRows. They run as child processes of this one, so the
// gateway's CPU time and allocations are still this process's alone.

// extCase is one row group of an external tool.
type extCase struct {
	label string
	h2    bool // h2load, HTTP/2 over TLS; else wrk, HTTP/1.1
	tls   bool
	size  int
	// rate, when set, is a fixed offered load (requests per second in
	// all) for HTTP/1.1 through h2load --h1 --rps: both proxies then
	// serve the same rate, so CPU per request compares their work at
	// equal load, not their wake-ups at different loads (a closed loop
	// like wrk's runs each proxy as fast as it goes; a slower one idles
	// more often and pays more per request for being woken).
	rate int
}

var extCases = []extCase{
	{label: "wrk 1 KiB", size: 1 << 10},
	{label: "wrk 1 KiB TLS", tls: true, size: 1 << 10},
	{label: "wrk 64 KiB", size: 64 << 10},
	{label: "h2load --h1 1 KiB at 10k req/s", size: 1 << 10, rate: 10000},
	// A machine where the gateway serves fewer than 10k plain requests a
	// second flat out (2026-11-27: ~7k) needs a rate both proxies keep up with.
	{label: "h2load --h1 1 KiB at 5k req/s", size: 1 << 10, rate: 5000},
	{label: "h2load 1 KiB h2+TLS", h2: true, tls: true, size: 1 << 10},
	{label: "h2load 64 KiB h2+TLS", h2: true, tls: true, size: 64 << 10},
	{label: "h2load 1 KiB h2+TLS at 5k req/s", h2: true, tls: true, size: 1 << 10, rate: 5000},
}

// Load shape of the external rows: wrk's connections, and h2load's
// connections × concurrent streams each (as a browser opens one connection
// per origin and runs many streams on it).
const (
	wrkConns  = 64
	h2Conns   = 16
	h2Streams = 16
)

// extConns is how many connections c's tool opens.
func extConns(c extCase) int {
	if c.h2 {
		return h2Conns
	}
	return wrkConns
}

// toolResult is what a wrk or h2load run reports.
type toolResult struct {
	requests int64   // completed in the run
	seconds  float64 // the run's length
	rps      float64
	p50, p99 float64 // ms (wrk); h2load reports no percentiles
	mean     float64 // ms (h2load)
	errors   int64   // non-2xx answers and socket errors
}

// extPaths are the paths an external row runs against: direct only for
// plain HTTP/1.1 (the app speaks neither TLS nor h2c), nginx's HTTP/2
// listener for the h2 rows.
func (b *bench) extPaths(c extCase) []path {
	ps := b.paths(c.tls)
	if c.h2 && b.ngx != nil {
		for i := range ps {
			if ps[i].name == "nginx" {
				ps[i].addr = b.ngx.h2
			}
		}
	}
	if c.h2 && b.gwBaseline != "" {
		ps = append(ps, path{name: "baseline", addr: b.gwBaseline, tls: true, cookie: b.cookieS, cpu: selfCPU})
	}
	return ps
}

// extRows runs every extCase in rounds: each round runs every path for
// -dur, starting one path further along than the round before; the table
// shows medians, and the note the spread of gateway ÷ nginx by round.
func (b *bench) extRows() error {
	for _, tool := range []string{"wrk", "h2load"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (apt-get install wrk nghttp2-client): %w", tool, err)
		}
	}
	rounds := max(1, b.f.rounds)
	for _, c := range extCases {
		if !strings.Contains(c.label, b.f.extOnly) {
			continue
		}
		ps := b.extPaths(c)
		got := map[string][]measuredExt{}
		for r := range rounds {
			for i := range ps {
				p := ps[(i+r)%len(ps)]
				if r == 0 {
					if _, err := b.runTool(c, p, b.f.warmup); err != nil {
						return err
					}
				}
				prof := ""
				if r == 0 && c.h2 && c.rate == 0 && c.size == 1<<10 {
					prof = b.f.h2profile
				}
				if r == 0 && !c.h2 && !c.tls && c.rate == 0 && c.size == 1<<10 {
					prof = b.f.wrkProfile
				}
				m, err := b.measureExt(c, p, prof)
				if err != nil {
					return err
				}
				logf("%s via %s, round %d of %d: %.0f req/s, CPU %.1f µs/req", c.label, p.name, r+1, rounds, m.res.rps, m.cpuPerRq)
				got[p.name] = append(got[p.name], m)
			}
		}
		b.rows = append(b.rows, extTableRows(c, got, rounds)...)
	}
	return nil
}

type measuredExt = measured[toolResult]

func (b *bench) measureExt(c extCase, p path, profile string) (measuredExt, error) {
	return measureWith(p, profile, func() (toolResult, int64, error) {
		r, err := b.runTool(c, p, b.f.dur)
		return r, r.requests, err
	})
}

// runTool runs wrk or h2load against p for d and parses its report.
func (b *bench) runTool(c extCase, p path, d time.Duration) (toolResult, error) {
	scheme := "http"
	if c.tls {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s/bytes?n=%d", scheme, p.addr, c.size)
	// Both tools take whole seconds.
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	tool, host, cookie := "h2load", ":authority: ", "cookie: "
	args := []string{"-t", "2", "-c", strconv.Itoa(wrkConns), "-D", secs}
	switch {
	case c.h2:
		args = []string{"-t", "2", "-c", strconv.Itoa(h2Conns), "-m", strconv.Itoa(h2Streams), "-D", secs}
	case c.rate > 0:
		args = append([]string{"--h1"}, args...)
	default:
		tool, host, cookie = "wrk", "Host: ", "Cookie: "
		args = []string{"-t", "2", "-c", strconv.Itoa(wrkConns), "-d", secs + "s", "--latency"}
	}
	if c.rate > 0 {
		args = append(args, "--rps", strconv.Itoa(max(1, c.rate/extConns(c))))
	}
	args = append(args, "-H", host+b.host)
	if p.name != "direct" {
		args = append(args, "-H", cookie+p.cookie)
	}
	cmd := exec.CommandContext(b.ctx, tool, append(args, url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return toolResult{}, fmt.Errorf("%s: %w\n%s%s", cmd, err, out, stderr.Bytes())
	}
	var r toolResult
	if tool == "h2load" {
		r, err = parseH2load(out)
	} else {
		r, err = parseWrk(out)
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	if r.errors > 0 {
		logf("%s via %s: %d errors or non-2xx answers", c.label, p.name, r.errors)
	}
	return r, nil
}

// parseWrk reads wrk --latency's report.
func parseWrk(out []byte) (toolResult, error) {
	var r toolResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "50%":
			r.p50 = wrkDur(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99 = wrkDur(f[1])
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			r.requests, _ = strconv.ParseInt(f[0], 10, 64)
			r.seconds = wrkDur(strings.TrimSuffix(f[3], ",")) / 1000
		case len(f) == 2 && f[0] == "Requests/sec:":
			r.rps, _ = strconv.ParseFloat(f[1], 64)
		case strings.HasPrefix(sc.Text(), "  Non-2xx or 3xx responses:"):
			n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			r.errors += n
		case len(f) > 2 && f[0] == "Socket" && f[1] == "errors:":
			for i := 3; i < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i], ","), 10, 64)
				r.errors += n
			}
		}
	}
	if r.requests == 0 || r.rps == 0 {
		return r, fmt.Errorf("no requests in wrk's report")
	}
	return r, nil
}

// wrkDur parses "2.31ms", "870.00us", "1.02s", "2.00m" into milliseconds.
func wrkDur(s string) float64 {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1000}, {"m", 60000}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return x * u.ms
			}
		}
	}
	return math.NaN()
}

// parseH2load reads h2load's report.
func parseH2load(out []byte) (toolResult, error) {
	var r toolResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "finished in "):
			// finished in 2.00s, 12345.50 req/s, 13.00MB/s
			r.seconds = wrkDur(strings.TrimSuffix(f[2], ",")) / 1000
			r.rps, _ = strconv.ParseFloat(f[3], 64)
		case strings.HasPrefix(line, "requests: "):
			// requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
			for i := 1; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				switch strings.TrimSuffix(f[i+1], ",") {
				case "succeeded":
					r.requests = n
				case "failed", "errored", "timeout":
					r.errors += n
				}
			}
		case strings.HasPrefix(line, "status codes: "):
			// status codes: N 2xx, N 3xx, N 4xx, N 5xx
			for i := 2; i+1 < len(f); i += 2 {
				if n, _ := strconv.ParseInt(f[i], 10, 64); n > 0 && !strings.HasPrefix(f[i+1], "2xx") {
					r.errors += n
				}
			}
		case strings.HasPrefix(line, "time for request:"):
			if len(f) >= 6 {
				r.mean = wrkDur(f[5])
			}
		}
	}
	if r.requests == 0 || r.rps == 0 {
		return r, fmt.Errorf("no requests in h2load's report")
	}
	return r, nil
}

// extTableRows turns one case's rounds into table rows.
func extTableRows(c extCase, got map[string][]measuredExt, rounds int) []row {
	pick := func(f func(measuredExt) float64) [3]float64 {
		return medianByPath(got, func(m measuredExt) bool { return m.res.requests > 0 }, f)
	}
	note := fmt.Sprintf("median of %d rounds, %d conns", rounds, extConns(c))
	if c.h2 {
		note += fmt.Sprintf(" × %d streams", h2Streams)
	}
	if c.rate > 0 {
		note += fmt.Sprintf(", %d req/s offered", extConns(c)*max(1, c.rate/extConns(c)))
	}
	note += roundsNote(got, rounds, func(m measuredExt) float64 { return m.res.rps }, func(m measuredExt) int64 { return m.res.errors })
	if bl := got["baseline"]; len(bl) > 0 {
		var rps, cpu, allocs []float64
		for _, m := range bl {
			rps, cpu, allocs = append(rps, m.res.rps), append(cpu, m.cpuPerRq), append(allocs, m.allocs)
		}
		var g []float64
		for _, m := range got["gateway"] {
			g = append(g, m.res.rps)
		}
		note += fmt.Sprintf("; gateway before #17 (ReverseProxy): %.0f req/s, %.1f µs/req, %.1f allocs/req, gateway ÷ it %.2f×",
			median(rps), median(cpu), median(allocs), median(g)/median(rps))
	}
	rows := []row{{name: c.label + " req/s", v: pick(func(m measuredExt) float64 { return m.res.rps }), higher: true, note: note}}
	if c.h2 || c.rate > 0 {
		rows = append(rows, row{name: c.label + " mean ms", v: pick(func(m measuredExt) float64 { return m.res.mean }), note: "h2load's mean time per request"})
	} else {
		rows = append(rows,
			row{name: c.label + " p50 ms", v: pick(func(m measuredExt) float64 { return m.res.p50 })},
			row{name: c.label + " p99 ms", v: pick(func(m measuredExt) float64 { return m.res.p99 })})
	}
	return append(rows,
		row{name: c.label + " CPU µs/req", v: pick(func(m measuredExt) float64 { return m.cpuPerRq }), note: "direct: the app's CPU; others: the proxy's"},
		row{name: c.label + " allocs/req", v: pick(func(m measuredExt) float64 { return m.allocs }), note: "gateway process"})
}
