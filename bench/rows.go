package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	sbruntime "github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The HTTP and latency rows: paths measured in interleaved rounds.

// spawn runs j in a child process and decodes its result.
func (b *bench) spawn(j job) (result, error) {
	j.CAFile = b.caFile
	arg, _ := json.Marshal(j)
	cmd := exec.CommandContext(b.ctx, b.exe, "-child", string(arg))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("load child %s: %w", j.Kind, err)
	}
	var r result
	if err := json.Unmarshal(out, &r); err != nil {
		return result{}, fmt.Errorf("load child %s: %w: %q", j.Kind, err, out)
	}
	if r.Err != "" {
		logf("%s %s%s: %d errors, first: %s", j.Kind, j.Addr, j.Path, r.Errors, r.Err)
	}
	return r, nil
}

// measured is one path's numbers in one window of a row group.
type measured[R any] struct {
	res      R       // the load's report: a child's result, or wrk's or h2load's
	cpuPerRq float64 // µs of the proxy's (or backend's) CPU per request; NaN unknown
	allocs   float64 // heap allocations per request in the gateway; NaN otherwise
}

// path is one way to reach the app.
type path struct {
	name   string // direct | gateway | nginx
	addr   string
	tls    bool
	cookie string
	cpu    func() time.Duration // CPU time of whoever serves this path
}

func (b *bench) paths(tlsOn bool) []path {
	var ps []path
	if !tlsOn {
		pid := containerPID(b.ctx, b.dc, sbruntime.Name(sbruntime.Stamp(benchLabels(b.run)), "bench"))
		ps = append(ps, path{name: "direct", addr: b.direct, cpu: func() time.Duration {
			if pid == 0 {
				return -1
			}
			return procCPU(pid)
		}})
	}
	gw := path{name: "gateway", addr: b.gwPlain, cookie: b.cookie, cpu: selfCPU}
	if tlsOn {
		gw.addr, gw.tls, gw.cookie = b.gwTLS, true, b.cookieS
	}
	ps = append(ps, gw)
	if b.ngx != nil {
		n := path{name: "nginx", addr: b.ngx.plain, cookie: b.cookie, cpu: func() time.Duration { return groupCPU(b.ngx.pids()) }}
		if tlsOn {
			n.addr, n.tls = b.ngx.tls, true
		}
		ps = append(ps, n)
	}
	return ps
}

func (b *bench) measure(p path, j job, profile string) (measured[result], error) {
	j.Addr, j.TLS, j.Host = p.addr, p.tls, b.host
	if p.name != "direct" {
		j.Cookie = p.cookie
	}
	return measureWith(p, profile, func() (result, int64, error) {
		r, err := b.spawn(j)
		return r, r.Total, err
	})
}

// measureWith runs load against p in a window; load returns its report
// and the requests it completed.
func measureWith[R any](p path, profile string, load func() (R, int64, error)) (measured[R], error) {
	w, err := startWindow(p, profile)
	if err != nil {
		return measured[R]{}, err
	}
	res, n, err := load()
	cpuPerRq, allocs := w.end(n, p.name == "gateway" || p.name == "baseline")
	return measured[R]{res, cpuPerRq, allocs}, err
}

// window measures the CPU of whoever serves a path and this process's
// allocations over a measuring window, with a CPU profile of the gateway
// when asked for.
type window struct {
	p           path
	cpu0        time.Duration
	ms0         runtime.MemStats
	stopProfile func()
}

func startWindow(p path, profile string) (*window, error) {
	w := &window{p: p, stopProfile: func() {}}
	if profile != "" && p.name == "gateway" {
		fh, err := os.Create(profile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(fh); err != nil {
			fh.Close()
			return nil, err
		}
		w.stopProfile = func() { pprof.StopCPUProfile(); fh.Close() }
	}
	runtime.GC()
	runtime.ReadMemStats(&w.ms0)
	w.cpu0 = p.cpu()
	return w, nil
}

// end closes the window over requests answered: CPU µs per request, and
// allocations per request when allocs (the path is served in this
// process); NaN where unknown.
func (w *window) end(requests int64, allocs bool) (cpuPerRq, allocsPerRq float64) {
	cpu1 := w.p.cpu()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	w.stopProfile()
	cpuPerRq, allocsPerRq = math.NaN(), math.NaN()
	if requests > 0 && w.cpu0 >= 0 {
		cpuPerRq = float64(cpu1-w.cpu0) / float64(time.Microsecond) / float64(requests)
	}
	if allocs && requests > 0 {
		allocsPerRq = float64(ms1.Mallocs-w.ms0.Mallocs) / float64(requests)
	}
	return cpuPerRq, allocsPerRq
}

// rewarm is the warmup before a path's later windows in an HTTP row. Every
// window is a new load child with new connections, so it needs a moment to
// dial (and shake hands) before its clock starts; the proxies' upstream pools
// are still warm from the path's first window (they keep idle connections
// 90 s, far longer than a row), so the full -warmup is not needed again.
const rewarm = 250 * time.Millisecond

// httpRows measures keep-alive throughput in rounds: each round runs every
// path for -dur, starting one path further along than the round before (direct,
// gateway, nginx; then gateway, nginx, direct; ...), so a burst of noise on
// the shared cores lands on one path's window in one round, not on all of a
// path's time. Each number in the table is the median over the rounds.
func (b *bench) httpRows() error {
	rounds := max(1, b.f.rounds)
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, tlsOn := range []bool{false, true} {
			label := fmt.Sprintf("%d KiB", size>>10)
			if tlsOn {
				label += " TLS"
			}
			ps := b.paths(tlsOn)
			got := map[string][]measured[result]{} // per path, one per round in round order
			for r := range rounds {
				for i := range ps {
					p := ps[(i+r)%len(ps)]
					warm := b.f.warmup
					if r > 0 {
						warm = min(warm, rewarm)
					}
					prof := "" // the first round only: a second StartCPUProfile would overwrite the file
					if r == 0 && size == 1<<10 && !tlsOn {
						prof = b.f.cpuprofile
					}
					m, err := b.measure(p, job{Kind: "http", Path: "/bytes?n=" + strconv.Itoa(size), Conns: b.f.conns,
						Dur: b.f.dur, Warmup: warm}, prof)
					if err != nil {
						return err
					}
					logf("HTTP %s via %s, round %d of %d: %.0f req/s, p99 %.1f ms", label, p.name, r+1, rounds,
						float64(m.res.Requests)/m.res.Seconds, m.res.P99)
					got[p.name] = append(got[p.name], m)
				}
			}
			pick := func(f func(measured[result]) float64) [3]float64 {
				return medianByPath(got, func(m measured[result]) bool { return m.res.Requests > 0 }, f)
			}
			rps := func(m measured[result]) float64 {
				if m.res.Requests == 0 {
					return 0
				}
				return float64(m.res.Requests) / m.res.Seconds
			}
			note := fmt.Sprintf("median of %d rounds", rounds) +
				roundsNote(got, rounds, rps, func(m measured[result]) int64 { return m.res.Errors })
			b.rows = append(b.rows,
				row{name: label + " req/s", v: pick(rps), higher: true, unit: "", note: note},
				row{name: label + " p50 ms", v: pick(func(m measured[result]) float64 { return m.res.P50 })},
				row{name: label + " p99 ms", v: pick(func(m measured[result]) float64 { return m.res.P99 })},
				row{name: label + " CPU µs/req", v: pick(func(m measured[result]) float64 { return m.cpuPerRq }), note: "direct: the app's CPU; others: the proxy's"},
				row{name: label + " allocs/req", v: pick(func(m measured[result]) float64 { return m.allocs }), note: "gateway process, incl. net/http server and transport"},
			)
		}
	}
	return nil
}

// medianByPath is, for direct, gateway and nginx in that order, the median
// of f over the rounds in got[path] that ok accepts and f knows (not NaN).
func medianByPath[M any](got map[string][]M, ok func(M) bool, f func(M) float64) [3]float64 {
	var v [3]float64
	for i, n := range []string{"direct", "gateway", "nginx"} {
		var xs []float64
		for _, m := range got[n] {
			if x := f(m); ok(m) && !math.IsNaN(x) {
				xs = append(xs, x)
			}
		}
		v[i] = median(xs)
	}
	return v
}

// roundsNote says how gateway ÷ nginx req/s ranged over the rounds that
// both served, and how many errors each path had: the note of a req/s row.
func roundsNote[M any](got map[string][]M, rounds int, rps func(M) float64, errs func(M) int64) string {
	var note string
	var spread []float64
	for r := range rounds {
		if g, n := got["gateway"], got["nginx"]; r < len(g) && r < len(n) && rps(g[r]) > 0 && rps(n[r]) > 0 {
			spread = append(spread, rps(g[r])/rps(n[r]))
		}
	}
	if len(spread) > 0 {
		note += fmt.Sprintf("; gateway ÷ nginx by round %.2f–%.2f×", slices.Min(spread), slices.Max(spread))
	}
	for _, n := range []string{"direct", "gateway", "nginx"} {
		var e int64
		for _, m := range got[n] {
			e += errs(m)
		}
		if e > 0 {
			note += fmt.Sprintf("; %s: %d errors", n, e)
		}
	}
	return note
}

// median is the middle of xs (the mean of the two middle values when their
// number is even), or NaN when xs is empty. It sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

func (b *bench) wsRTTRows() error {
	return b.latencyRows("WebSocket round trip", "WebSocket RTT",
		job{Kind: "ws-rtt", Path: "/ws", Dur: b.f.wsDur, Warmup: b.f.warmup / 2},
		"16-byte echo, one socket, one message in flight")
}

func (b *bench) firstByteRows() error {
	return b.latencyRows("first byte on a new connection", "running sandbox: first byte",
		job{Kind: "http", Path: "/", Conns: 1, NewConn: true, Dur: 2 * time.Second, Warmup: 200 * time.Millisecond},
		"new TCP connection + GET / each time")
}

// latencyRows measures j on every path and adds p50 and p99 rows.
func (b *bench) latencyRows(what, name string, j job, note string) error {
	v, v99 := nan3(), nan3()
	for _, p := range b.paths(false) {
		logf("%s via %s", what, p.name)
		m, err := b.measure(p, j, "")
		if err != nil {
			return err
		}
		if m.res.Requests == 0 {
			continue
		}
		i := slices.Index([]string{"direct", "gateway", "nginx"}, p.name)
		v[i], v99[i] = m.res.P50, m.res.P99
	}
	b.rows = append(b.rows, row{name: name + " p50 ms", v: v, note: note}, row{name: name + " p99 ms", v: v99})
	return nil
}
