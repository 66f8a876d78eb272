// Command bench measures previewgate against the direct path and nginx on
// this machine, in one run, and prints a Markdown table (issues 7, 8 and 9):
// throughput, latency, WebSockets, idle-socket memory, and first-byte times
// of a running, woken, created and pool-claimed sandbox next to the raw
// Docker time of the same operation.
//
//	go run ./bench [-dur 1.5s] [-rounds 3] [-conns 64] [-sockets 10000] [-cpuprofile gw.prof]
//
// It builds testdata/testapp into an image, runs the gateway in this process
// with a real sandboxmgr.Manager (plain and TLS listeners on 127.0.0.1), runs
// nginx as a reference proxy when it is on PATH, and drives the load from
// child processes (this binary re-executed), so that this process's CPU,
// allocations and memory are the gateway's. Load only ever targets
// 127.0.0.1 or the bench's own containers. Everything it creates in Docker
// carries previewgate.bench labels and is removed on exit, also on Ctrl-C.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/gateway"
	"github.com/previewgate/previewgate/sandboxmgr"
)

type flags struct {
	dur, warmup, wsDur time.Duration
	rounds             int
	conns, sockets     int
	cold               int
	cpuprofile         string
	memprofile         string
	nginx              string
	netHTTP            bool
	only               string
}

func main() {
	child := flag.String("child", "", "internal: run a load job (JSON) and print its result")
	var f flags
	flag.DurationVar(&f.dur, "dur", 1500*time.Millisecond, "measured time per path and round in the HTTP rows")
	flag.IntVar(&f.rounds, "rounds", 3, "HTTP rows: rounds in which the paths take turns (-dur each); the table shows the median")
	flag.DurationVar(&f.warmup, "warmup", time.Second, "warmup before each row, and before a path's first window in an HTTP row (not measured)")
	flag.DurationVar(&f.wsDur, "wsdur", 3*time.Second, "measured time per WebSocket round-trip row")
	flag.IntVar(&f.conns, "conns", 64, "keep-alive connections for HTTP rows")
	flag.IntVar(&f.sockets, "sockets", 10000, "idle WebSockets held open for the memory rows (0 skips)")
	flag.IntVar(&f.cold, "cold", 5, "samples per cold-start row: wake, create; 2× for the pool claim, 4× for the running sandbox (0 skips them)")
	flag.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the gateway during the 1 KiB plain row")
	flag.StringVar(&f.memprofile, "memprofile", "", "write a heap profile of the gateway while the idle WebSockets are open")
	flag.StringVar(&f.only, "only", "", "comma-separated row groups to run: http,ws,firstbyte,idle,cold (default all)")
	flag.BoolVar(&f.netHTTP, "nethttp", false, "serve the gateway with net/http only (no lean HTTP/1.1 loop), for comparison")
	flag.StringVar(&f.nginx, "nginx", "nginx", "nginx binary (looked up on PATH); empty skips the nginx columns")
	flag.Parse()
	limit := raiseNoFile(200_000)
	if *child != "" {
		var j job
		if err := json.Unmarshal([]byte(*child), &j); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(2)
		}
		runChild(j)
		return
	}
	// Each proxied socket is two descriptors in the gateway (this process).
	if fit := int(limit/2) - 1000; limit > 0 && f.sockets > fit {
		fmt.Fprintf(os.Stderr, "bench: RLIMIT_NOFILE is %d here: holding %d idle sockets instead of %d\n", limit, fit, f.sockets)
		f.sockets = fit
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// bench holds one run's state.
type bench struct {
	f       flags
	ctx     context.Context
	exe     string
	dir     string // temp dir: cert, key, nginx prefix
	caFile  string
	host    string // sandbox-bench.<domain>
	domain  string
	token   string
	cookie  string // plain gateway cookie
	cookieS string // TLS gateway cookie (__Host-)
	direct  string // container ip:3000
	gwPlain string
	gwTLS   string
	ngx     *nginxProxy
	dc      *client.Client
	mgr     *sandboxmgr.Manager
	tpl     *config.Template
	// The warm-pool template ("pooled", pool: 2, same image) is filled only
	// while poolOn, so its containers do not run during the other rows.
	poolTpl   *config.Template
	poolOn    atomic.Bool
	tokenPool string // names the pooled template
	kinds     coldKinds
	run       string
	netName   string
	image     string
	rows      []row
}

func run(f flags) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{f: f, ctx: ctx, domain: "bench.test"}
	b.host = "sandbox-bench." + b.domain
	b.run = randHex(4)
	b.netName = "pgbench-" + b.run
	b.image = "previewgate-bench-testapp:" + b.run
	if b.exe, err = os.Executable(); err != nil {
		return err
	}
	if b.dir, err = os.MkdirTemp("", "pgbench"); err != nil {
		return err
	}
	defer os.RemoveAll(b.dir)

	b.dc, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer b.dc.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = b.dc.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("docker engine unreachable: %w", err)
	}
	var cleanOnce sync.Once
	cleanup := func() {
		cleanOnce.Do(func() {
			b.ngx.stop()
			if b.mgr != nil {
				b.mgr.Close()
			}
			if err := cleanupDocker(b.dc, b.run, b.netName, b.image); err != nil {
				fmt.Fprintln(os.Stderr, "bench cleanup:", err)
			}
		})
	}
	defer cleanup()
	// A second Ctrl-C, or a run stuck after the first, still cleans up.
	go func() {
		<-ctx.Done()
		select {
		case <-time.After(20 * time.Second):
		case <-waitSignal():
		}
		cleanup()
		os.Exit(130)
	}()

	logf("building the test app image")
	labels := benchLabels(b.run)
	if err := buildTestApp(ctx, b.dc, b.image, labels); err != nil {
		return err
	}
	if err := b.startGateway(labels); err != nil {
		return err
	}
	if f.nginx != "" {
		if bin, err := exec.LookPath(f.nginx); err == nil {
			if b.ngx, err = startNginx(ctx, bin, b.dir, b.direct); err != nil {
				return err
			}
			logf("nginx %s on %s (TLS %s)", bin, b.ngx.plain, b.ngx.tls)
		} else {
			logf("nginx not found: the nginx columns stay empty")
		}
	}
	steps := []struct {
		name string
		fn   func() error
	}{{"http", b.httpRows}, {"ws", b.wsRTTRows}, {"firstbyte", b.firstByteRows}, {"idle", b.idleRows}, {"cold", b.coldRows}}
	for _, s := range steps {
		if f.only != "" && !slices.Contains(strings.Split(f.only, ","), s.name) {
			continue
		}
		if err := s.fn(); err != nil {
			printTable(os.Stdout, b.rows)
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	printTable(os.Stdout, b.rows)
	return nil
}

func waitSignal() <-chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	return c
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startGateway runs the gateway in this process: a real manager, an HS256
// key, one template on the test app, limits on but far above the load (so
// they are evaluated on every request and never reject), plain and TLS
// listeners on 127.0.0.1. It creates the "bench" sandbox through it.
func (b *bench) startGateway(labels map[string]string) error {
	key := config.Key{KID: "bench", Alg: "HS256", Secret: config.Secret(base64.RawURLEncoding.EncodeToString([]byte(randHex(32))))}
	huge := &config.Rate{Rate: 1e9, Burst: 1e9}
	cfg := &config.Config{
		Domains: config.StringList{b.domain},
		Auth:    config.Auth{Issuers: []string{"bench"}, Keys: []config.Key{key}},
		Docker:  config.Docker{Network: b.netName},
		Templates: map[string]*config.Template{"testapp": {
			Image: b.image, Env: map[string]string{"WS_PUSH": "1h"}, Memory: 4 << 30, CPUs: float64(runtime.NumCPU()),
			Pids: 4096, ColdStart: config.ColdStartBlock,
		}, "pooled": {
			Image: b.image, Env: map[string]string{"WS_PUSH": "1h"}, Memory: 4 << 30, CPUs: float64(runtime.NumCPU()),
			Pids: 4096, ColdStart: config.ColdStartBlock, Pool: poolSize,
		}},
		DefaultTemplate: "testapp",
		Limits: config.Limits{
			RateLimits: config.RateLimits{PerIP: huge, PerSandbox: huge, PerSubject: huge},
			MaxRunning: 1000, WebSocketsPerSandbox: 1 << 20, WebSocketsPerIP: 1 << 20,
		},
		Log: config.Log{Level: "error"},
	}
	cfg.ApplyDefaults()
	b.tpl = cfg.Templates["testapp"]
	b.poolTpl = cfg.Templates["pooled"]
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var err error
	b.mgr, err = sandboxmgr.New(sandboxmgr.Config{
		Network: b.netName, Labels: labels, MaxRunning: 1000,
		MaxConcurrentStarts: cfg.Limits.MaxConcurrentStarts,
		Templates:           func(name string) *config.Template { return cfg.Templates[name] },
		ListTemplates: func() []*config.Template {
			if b.poolOn.Load() {
				return []*config.Template{b.poolTpl}
			}
			return nil
		},
		OnColdStart: b.kinds.add,
	}, log)
	if err != nil {
		return err
	}
	if err := b.mgr.Start(b.ctx); err != nil {
		return fmt.Errorf("sandbox manager: %w", err)
	}
	if b.token, err = auth.Mint(key, auth.MintOptions{Subject: "bench", Sandbox: "*", Issuer: "bench", TTL: time.Hour}); err != nil {
		return err
	}
	if b.tokenPool, err = auth.Mint(key, auth.MintOptions{Subject: "bench", Sandbox: "*", Template: "pooled", Issuer: "bench", TTL: time.Hour}); err != nil {
		return err
	}
	b.cookie = "previewgate_token=" + b.token
	b.cookieS = "__Host-previewgate_token=" + b.token

	certPEM, keyPEM, err := selfSigned("*." + b.domain)
	if err != nil {
		return err
	}
	b.caFile = filepath.Join(b.dir, "cert.pem")
	if err := os.WriteFile(b.caFile, certPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "key.pem"), keyPEM, 0o600); err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}

	for _, tlsOn := range []bool{false, true} {
		gw, err := gateway.New(cfg, b.mgr, gateway.Options{TLS: tlsOn}, log)
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		var h http.Handler = gw
		if b.f.netHTTP {
			h = http.HandlerFunc(gw.ServeHTTP) // hides the lean loop's host check
		}
		srv := gateway.NewServer(cfg, h, log)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		if tlsOn {
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
				NextProtos: []string{"h2", "http/1.1"}}
			b.gwTLS = ln.Addr().String()
			go srv.Serve(ln)
		} else {
			b.gwPlain = ln.Addr().String()
			go srv.Serve(ln)
		}
	}
	logf("gateway on %s (TLS %s); creating the sandbox", b.gwPlain, b.gwTLS)
	if err := b.get(b.gwPlain, b.host, "/"); err != nil {
		return fmt.Errorf("first request through the gateway: %w", err)
	}
	ep, err := b.mgr.Ensure(b.ctx, "bench", b.tpl)
	if err != nil {
		return err
	}
	b.direct = ep.Addr
	return nil
}

// get sends one GET with the plain cookie and checks for 200.
func (b *bench) get(addr, host, path string) error {
	req, _ := http.NewRequestWithContext(b.ctx, "GET", "http://"+addr+path, nil)
	req.Host = host
	req.Header.Set("Cookie", b.cookie)
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func selfSigned(names ...string) (certPEM, keyPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "previewgate bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

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

// measured is one path's numbers for a row group.
type measured struct {
	res      result
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
		pid := containerPID(b.ctx, b.dc, sandboxmgr.ContainerName("bench"))
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

func (b *bench) measure(p path, j job, profile string) (measured, error) {
	j.Addr, j.TLS, j.Host = p.addr, p.tls, b.host
	if p.name != "direct" {
		j.Cookie = p.cookie
	}
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := p.cpu()
	if profile != "" && p.name == "gateway" {
		fh, err := os.Create(profile)
		if err != nil {
			return measured{}, err
		}
		defer fh.Close()
		if err := pprof.StartCPUProfile(fh); err != nil {
			return measured{}, err
		}
		defer pprof.StopCPUProfile()
	}
	r, err := b.spawn(j)
	if err != nil {
		return measured{}, err
	}
	cpu1 := p.cpu()
	runtime.ReadMemStats(&ms1)
	m := measured{res: r, cpuPerRq: math.NaN(), allocs: math.NaN()}
	if r.Total > 0 && cpu0 >= 0 {
		m.cpuPerRq = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(r.Total)
	}
	if p.name == "gateway" && r.Total > 0 {
		m.allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(r.Total)
	}
	return m, nil
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
			got := map[string][]measured{} // per path, one per round in round order
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
			pick := func(f func(measured) float64) [3]float64 {
				var v [3]float64
				for i, n := range []string{"direct", "gateway", "nginx"} {
					var xs []float64
					for _, m := range got[n] {
						if x := f(m); m.res.Requests > 0 && !math.IsNaN(x) {
							xs = append(xs, x)
						}
					}
					v[i] = median(xs)
				}
				return v
			}
			rps := func(m measured) float64 { return float64(m.res.Requests) / m.res.Seconds }
			note := fmt.Sprintf("median of %d rounds", rounds)
			var spread []float64 // gateway ÷ nginx req/s in each round
			for r := range rounds {
				if g, n := got["gateway"], got["nginx"]; r < len(g) && r < len(n) && g[r].res.Requests > 0 && n[r].res.Requests > 0 {
					spread = append(spread, rps(g[r])/rps(n[r]))
				}
			}
			if len(spread) > 0 {
				note += fmt.Sprintf("; gateway ÷ nginx by round %.2f–%.2f×", slices.Min(spread), slices.Max(spread))
			}
			for _, n := range []string{"direct", "gateway", "nginx"} {
				var e int64
				for _, m := range got[n] {
					e += m.res.Errors
				}
				if e > 0 {
					note += fmt.Sprintf("; %s: %d errors", n, e)
				}
			}
			b.rows = append(b.rows,
				row{name: label + " req/s", v: pick(rps), higher: true, unit: "", note: note},
				row{name: label + " p50 ms", v: pick(func(m measured) float64 { return m.res.P50 })},
				row{name: label + " p99 ms", v: pick(func(m measured) float64 { return m.res.P99 })},
				row{name: label + " CPU µs/req", v: pick(func(m measured) float64 { return m.cpuPerRq }), note: "direct: the app's CPU; others: the proxy's"},
				row{name: label + " allocs/req", v: pick(func(m measured) float64 { return m.allocs }), note: "gateway process, incl. net/http server and transport"},
			)
		}
	}
	return nil
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
	var v, v99 [3]float64
	for i := range v {
		v[i], v99[i] = math.NaN(), math.NaN()
	}
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

// memSnap is the gateway process's memory at one moment, after a GC.
type memSnap struct {
	heap, stacks, rss int64
	goroutines        int
}

func snap() memSnap {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnap{heap: int64(ms.HeapAlloc), stacks: int64(ms.StackInuse), rss: vmRSS("self"), goroutines: runtime.NumGoroutine()}
}

func (b *bench) idleRows() error {
	n := b.f.sockets
	if n <= 0 {
		return nil
	}
	var rss, heap, leak [3]float64
	for i := range rss {
		rss[i], heap[i], leak[i] = math.NaN(), math.NaN(), math.NaN()
	}
	note := ""
	for _, p := range b.paths(false) {
		if p.name == "direct" {
			continue
		}
		logf("%d idle WebSockets via %s", n, p.name)
		j := job{Kind: "ws-idle", Path: "/ws", Conns: n, Addr: p.addr, Host: b.host, Cookie: p.cookie, CAFile: b.caFile}
		var before memSnap
		var nginxBefore int64
		if p.name == "gateway" {
			before = snap()
		} else {
			nginxBefore = groupRSS(b.ngx.pids())
		}
		open, closeFn, err := b.spawnIdle(j)
		if err != nil {
			return err
		}
		i := slices.Index([]string{"direct", "gateway", "nginx"}, p.name)
		if open == 0 {
			closeFn()
			note += p.name + ": no socket opened; "
			continue
		}
		if open < n {
			note += fmt.Sprintf("%s: %d of %d opened; ", p.name, open, n)
		}
		if p.name == "gateway" {
			during := snap()
			if b.f.memprofile != "" {
				if err := writeHeapProfile(b.f.memprofile); err != nil {
					return err
				}
			}
			rss[i] = float64(during.rss-before.rss) / float64(open) / 1024
			heap[i] = float64((during.heap+during.stacks)-(before.heap+before.stacks)) / float64(open) / 1024
			note += fmt.Sprintf("gateway goroutines %d → %d with sockets open; ", before.goroutines, during.goroutines)
		} else {
			time.Sleep(time.Second)
			rss[i] = float64(groupRSS(b.ngx.pids())-nginxBefore) / float64(open) / 1024
		}
		if err := closeFn(); err != nil {
			return err
		}
		if p.name == "gateway" {
			// Leak check: the goroutines of the proxied sockets must go.
			deadline := time.Now().Add(15 * time.Second)
			var after memSnap
			for {
				after = snap()
				if after.goroutines <= before.goroutines || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			// Fewer than before is no leak: idle pool connections may have expired meanwhile.
			leak[i] = float64(max(0, after.goroutines-before.goroutines))
			note += fmt.Sprintf("%d after close", after.goroutines)
		}
	}
	b.rows = append(b.rows,
		row{name: fmt.Sprintf("idle WebSocket RSS KiB/socket (%d open)", n), v: rss, note: "proxy process(es) only"},
		row{name: "idle WebSocket heap+stack KiB/socket", v: heap, note: "Go heap after GC + goroutine stacks"},
		row{name: "goroutines left after close", v: leak, note: note})
	return nil
}

// spawnIdle starts a ws-idle child and waits until its sockets are open.
// close makes the child close them and waits for it to exit.
func (b *bench) spawnIdle(j job) (open int, closeFn func() error, err error) {
	arg, _ := json.Marshal(j)
	cmd := exec.CommandContext(b.ctx, b.exe, "-child", string(arg))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	var line string
	var nerr int
	if _, err := fmt.Fscanf(out, "%s %d %d\n", &line, &open, &nerr); err != nil || line != "open" {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, nil, fmt.Errorf("ws-idle child: %v", err)
	}
	if nerr > 0 {
		logf("ws-idle %s: %d sockets failed to open", j.Addr, nerr)
	}
	return open, func() error {
		fmt.Fprintln(in, "close")
		in.Close()
		var r result
		_ = json.NewDecoder(out).Decode(&r)
		if r.Err != "" {
			logf("ws-idle %s: %d errors, first: %s", j.Addr, r.Errors, r.Err)
		}
		return cmd.Wait()
	}, nil
}

func (b *bench) coldRows() error {
	k := b.f.cold
	if k <= 0 {
		return nil
	}
	nan := [3]float64{math.NaN(), math.NaN(), math.NaN()}
	labels := benchLabels(b.run)

	if err := b.runningRows(4 * k); err != nil {
		return err
	}

	// Wake: a stopped sandbox, first request through the gateway, vs the
	// same done by hand (docker start, inspect, wait for listen, GET).
	logf("cold start: wake a stopped sandbox (%d samples)", k)
	if err := b.get(b.gwPlain, "sandbox-wake."+b.domain, "/"); err != nil {
		return fmt.Errorf("create wake sandbox: %w", err)
	}
	raw := &rawContainer{c: b.dc, name: "pgbench-raw-" + b.run, network: b.netName}
	if err := raw.create(b.ctx, b.image, labels); err != nil {
		return err
	}
	var gwWake, rawWake []time.Duration
	for range k {
		if err := b.mgr.Stop(b.ctx, "wake"); err != nil {
			return err
		}
		t0 := time.Now()
		if err := firstByte(b.gwPlain, "sandbox-wake."+b.domain, "/", "Cookie: "+b.cookie); err != nil {
			return fmt.Errorf("wake through the gateway: %w", err)
		}
		gwWake = append(gwWake, time.Since(t0))

		_ = raw.stop(b.ctx)
		t0 = time.Now()
		if err := raw.startAndServe(b.ctx); err != nil {
			return fmt.Errorf("raw start: %w", err)
		}
		rawWake = append(rawWake, time.Since(t0))
	}
	b.rows = append(b.rows, pair("wake stopped sandbox, first byte", rawWake, gwWake,
		fmt.Sprintf("direct = docker start + inspect + app listen + GET; gateway adds %.1f ms at p50", pct(gwWake, 50)-pct(rawWake, 50)))...)

	// Create: a brand-new id through the gateway vs create+start by hand.
	logf("cold start: create new sandboxes (%d samples)", k)
	var gwNew, rawNew []time.Duration
	for i := range k {
		id := fmt.Sprintf("new-%d", i)
		t0 := time.Now()
		if err := firstByte(b.gwPlain, "sandbox-"+id+"."+b.domain, "/", "Cookie: "+b.cookie); err != nil {
			return fmt.Errorf("create through the gateway: %w", err)
		}
		gwNew = append(gwNew, time.Since(t0))
		_ = b.mgr.Remove(b.ctx, id)

		r := &rawContainer{c: b.dc, name: fmt.Sprintf("pgbench-rawnew-%s-%d", b.run, i), network: b.netName}
		t0 = time.Now()
		if err := r.create(b.ctx, b.image, labels); err != nil {
			return err
		}
		if err := r.startAndServe(b.ctx); err != nil {
			return fmt.Errorf("raw create: %w", err)
		}
		rawNew = append(rawNew, time.Since(t0))
		_ = r.remove(b.ctx)
	}
	b.rows = append(b.rows, pair("create new sandbox, first byte", rawNew, gwNew,
		fmt.Sprintf("direct = docker create + start + inspect + listen + GET; gateway adds %.1f ms at p50", pct(gwNew, 50)-pct(rawNew, 50)))...)

	if err := b.poolRows(2 * k); err != nil {
		return err
	}

	// Stampede: 1,000 concurrent first requests for one cold id.
	const burst = 1000
	logf("cold start: %d concurrent first requests for one new id", burst)
	bh := "sandbox-burst." + b.domain
	arg := job{Kind: "burst", Addr: b.gwPlain, Host: bh, Path: "/", Cookie: b.cookie, Conns: burst}
	r, err := b.spawn(arg)
	if err != nil {
		return err
	}
	n, err := countContainers(b.ctx, b.dc, b.run, "burst")
	if err != nil {
		return err
	}
	v := nan
	v[1] = r.P99
	b.rows = append(b.rows, row{name: fmt.Sprintf("%d concurrent first requests, one cold id: p99 ms", burst), v: v,
		note: fmt.Sprintf("%d ok, %d errors, %d container(s) created (want 1, 0 errors)", r.Requests, r.Errors, n)})
	return nil
}

func writeHeapProfile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(fh, 0); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
