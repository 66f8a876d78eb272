// Command h2flush measures net/http's HTTP/2 server alone: a TLS server
// whose handler answers 1 KiB, loaded by h2load (16 connections × 16
// streams), reporting write and read system calls and CPU per request
// of this process. Built with the Go toolchain as it is and with one
// patched by h2_bundle.diff (see BENCHMARKS.md), it shows what the
// server's flush of a response's HEADERS before its DATA costs, apart
// from anything of previewgate's.
//
// It is a measuring tool: it must never be imported or shipped, and it
// listens on loopback only.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	dur := flag.Duration("dur", 5*time.Second, "measured h2load time")
	size := flag.Int("size", 1024, "response body bytes")
	h2load := flag.String("h2load", "h2load", "h2load binary (Debian's nghttp2-client)")
	label := flag.String("label", "net/http", "name of this build in the output")
	flag.Parse()

	body := []byte(strings.Repeat("x", *size))
	var served atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	url := srv.URL + "/"

	load := func(d time.Duration) string {
		out, err := exec.Command(*h2load, "-c16", "-m16", "-D"+strconv.Itoa(int(d.Seconds())), url).CombinedOutput()
		if err != nil {
			log.Fatalf("h2load: %v\n%s", err, out)
		}
		return string(out)
	}
	load(2 * time.Second) // warm up: connections, TLS sessions, the heap
	before, n0 := sample(), served.Load()
	out := load(*dur)
	after, n := sample(), float64(served.Load()-n0)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "finished in") {
			fmt.Println(l)
		}
	}
	fmt.Printf("%s: %.0f requests; per request: %.2f writes, %.2f reads, %.1f µs CPU\n", *label, n,
		float64(after.writes-before.writes)/n, float64(after.reads-before.reads)/n,
		float64((after.cpu-before.cpu).Microseconds())/n)
}

// counters are this process's system-call and CPU totals.
type counters struct {
	reads, writes int64
	cpu           time.Duration
}

func sample() counters {
	var c counters
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		log.Fatalf("read system call counts: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "syscr:":
				c.reads = v
			case "syscw:":
				c.writes = v
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatalf("getrusage: %v", err)
	}
	c.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return c
}
