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
// allocations and memory are the gateway's. Everything it creates in
// Docker carries previewgate.bench labels and is removed on exit, also on
// Ctrl-C.
//
// It must never send load anywhere but 127.0.0.1 and its own containers,
// never touch a Docker object without its run's labels, and never be
// imported: it is a tool beside the previewgate binary, not part of it (its
// tests cover only the parsing of the load generators' reports).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/internal/dockerbuild"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr"
)

type flags struct {
	dur, warmup, wsDur time.Duration
	rounds             int
	conns, sockets     int
	cold               int
	cpuprofile         string
	h2profile          string
	wrkProfile         string
	pageloads          int
	extOnly            string
	h2Baseline         bool
	memprofile         string
	nginx              string
	netHTTP            bool
	fastApp            bool
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
	flag.StringVar(&f.h2profile, "h2profile", "", "write a CPU profile of the gateway during the h2load 1 KiB row (round 1)")
	flag.StringVar(&f.wrkProfile, "wrkprofile", "", "write a CPU profile of the gateway during the wrk 1 KiB plain row (round 1)")
	flag.IntVar(&f.pageloads, "pageloads", 5, "browser rows: page loads per path, cold and warm each (interleaved), and HMR edits ×4")
	flag.StringVar(&f.extOnly, "extonly", "", "ext rows: run only those whose label contains this (\"h2load\", \"wrk 1 KiB\")")
	flag.BoolVar(&f.h2Baseline, "h2baseline", false, "h2load rows: also run a gateway that reads every HTTP/2 request body through the server, as before #17 (in the notes)")
	flag.StringVar(&f.memprofile, "memprofile", "", "write a heap profile of the gateway while the idle WebSockets are open")
	flag.StringVar(&f.only, "only", "", "comma-separated row groups to run: http,ext,browser,ws,firstbyte,idle,cold (default all)")
	flag.BoolVar(&f.netHTTP, "nethttp", false, "serve the gateway with net/http only (no lean HTTP/1.1 loop), for comparison")
	flag.BoolVar(&f.fastApp, "fastapp", false, "serve testdata/fastapp (a handler that costs almost nothing) instead of testdata/testapp; only the http and ext rows")
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
	f          flags
	ctx        context.Context
	exe        string
	dir        string // temp dir: cert, key, nginx prefix
	caFile     string
	host       string // sandbox-bench.<domain>
	domain     string
	token      string
	cookie     string // plain gateway cookie
	cookieS    string // TLS gateway cookie (__Host-)
	direct     string // container ip:3000
	gwPlain    string
	gwTLS      string
	gwBaseline string // -h2baseline: TLS gateway reading HTTP/2 bodies as before #17
	ngx        *nginxProxy
	dc         *client.Client
	mgr        *sandboxmgr.Manager
	recs       *records.Records
	store      *boltstore.Store // recs' store, in dir
	tpl        *config.Template
	// The warm-pool template ("pooled", pool: 2, same image) is filled only
	// while poolOn, so its containers do not run during the other rows.
	poolTpl    *config.Template
	poolOn     atomic.Bool
	tokenPool  string // names the pooled template
	tokenVite  string // names the vite template
	viteImage  string // testdata/viteapp, built when the browser rows run
	viteDirect string // vite container ip:3000
	kinds      coldKinds
	run        string
	netName    string
	image      string
	rows       []row
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
			if b.store != nil {
				b.store.Close()
			}
			if err := cleanupDocker(b.dc, b.run, b.netName, b.image, b.viteImage); err != nil {
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

	labels := benchLabels(b.run)
	app := "./testdata/testapp"
	if f.fastApp {
		// The fast app answers /bytes only: the rows that need the
		// testapp's other routes (WebSockets, cold starts, browsers) are out.
		for _, o := range strings.Split(f.only, ",") {
			if o != "http" && o != "ext" {
				return fmt.Errorf("-fastapp runs only the http and ext rows: give -only http,ext")
			}
		}
		app = "./testdata/fastapp"
	}
	// FROM scratch images, as internal/testing/dockertest builds them for
	// the tests (that package needs *testing.T).
	logf("building the app image from %s", app)
	if err := dockerbuild.GoProgram(ctx, b.dc, app, b.image, 3000, labels); err != nil {
		return err
	}
	if f.only == "" || slices.Contains(strings.Split(f.only, ","), "browser") {
		b.viteImage = "previewgate-bench-viteapp:" + b.run
		if err := dockerbuild.GoProgram(ctx, b.dc, "./testdata/viteapp", b.viteImage, 3000, labels); err != nil {
			return err
		}
	}
	if err := b.startGateway(labels); err != nil {
		return err
	}
	if f.nginx != "" {
		if bin, err := exec.LookPath(f.nginx); err == nil {
			if b.ngx, err = startNginx(ctx, bin, b.dir, b.direct, b.viteDirect, "sandbox-vite."+b.domain); err != nil {
				return err
			}
			logf("nginx %s on %s (TLS %s, HTTP/2 over TLS %s)", bin, b.ngx.plain, b.ngx.tls, b.ngx.h2)
		} else {
			logf("nginx not found: the nginx columns stay empty")
		}
	}
	steps := []struct {
		name string
		fn   func() error
	}{{"http", b.httpRows}, {"ext", b.extRows}, {"browser", b.browserRows}, {"ws", b.wsRTTRows}, {"firstbyte", b.firstByteRows}, {"idle", b.idleRows}, {"cold", b.coldRows}}
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
