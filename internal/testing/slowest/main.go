// Command slowest reads `go test -json` from stdin and writes what plain
// `go test` would: package result lines, build errors, and the whole
// output of every test that failed (passing tests stay quiet). At the end
// it prints the ten slowest tests (top-level, with their subtests' time)
// and the packages by elapsed time, so a slow CI run says where the time
// went. It exits 1 if anything failed, whatever the exit status of go test
// (which .ci/run checks too, with pipefail).
//
// Usage: go test -json ./... | go run ./internal/testing/slowest
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json (go doc test2json).
type event struct {
	Action      string
	Package     string
	ImportPath  string // build-output, build-fail
	Test        string
	Elapsed     float64 // seconds
	Output      string
	FailedBuild string
}

type key struct{ pkg, test string }

type timing struct {
	key
	elapsed time.Duration
}

func main() {
	failed, err := summarize(os.Stdin, os.Stdout, 10)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize copies the readable part of the event stream r to w, then the
// n slowest tests and the packages' times; it reports whether anything
// failed.
func summarize(r io.Reader, w io.Writer, n int) (failed bool, err error) {
	out := map[key]*strings.Builder{} // output of running tests, printed if they fail
	var tests, pkgs []timing
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // not an event: go test's own message
			continue
		}
		k := key{ev.Package, ev.Test}
		switch {
		case ev.Action == "build-output":
			io.WriteString(w, ev.Output)
		case ev.Action == "build-fail":
			failed = true
		case ev.Test == "" && ev.Action == "output":
			// Package lines (ok, FAIL, ?) and what a test binary printed
			// outside any test (a panic, a timeout, a race report). A bare
			// PASS is verbose mode's; plain go test does not print it.
			if ev.Output != "PASS\n" {
				io.WriteString(w, ev.Output)
			}
		case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail"):
			if ev.Action == "fail" {
				failed = true
				// A test still running when its binary failed (a panic,
				// the -timeout) has no result of its own: show its output.
				for tk, b := range out {
					if tk.pkg == ev.Package {
						io.WriteString(w, b.String())
						delete(out, tk)
					}
				}
			}
			pkgs = append(pkgs, timing{k, seconds(ev.Elapsed)})
		case ev.Action == "output":
			if framing(ev.Output) {
				continue
			}
			b := out[k]
			if b == nil {
				b = &strings.Builder{}
				out[k] = b
			}
			b.WriteString(ev.Output)
		case ev.Action == "pass" || ev.Action == "skip" || ev.Action == "fail":
			if ev.Action == "fail" {
				failed = true
				if b := out[k]; b != nil {
					io.WriteString(w, b.String())
				}
			}
			delete(out, k)
			if !strings.Contains(ev.Test, "/") && ev.Action != "skip" {
				tests = append(tests, timing{k, seconds(ev.Elapsed)})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	writeSlowest(w, tests, pkgs, n)
	return failed, nil
}

func writeSlowest(w io.Writer, tests, pkgs []timing, n int) {
	bySlowest := func(ts []timing) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].elapsed > ts[j].elapsed })
	}
	bySlowest(tests)
	bySlowest(pkgs)
	fmt.Fprintf(w, "\nthe %d slowest tests:\n", min(n, len(tests)))
	for _, t := range tests[:min(n, len(tests))] {
		fmt.Fprintf(w, "%8.1fs  %s %s\n", t.elapsed.Seconds(), t.pkg, t.test)
	}
	fmt.Fprintf(w, "\npackages by elapsed time (their tests run in parallel with each other's):\n")
	for _, p := range pkgs {
		if p.elapsed >= time.Second {
			fmt.Fprintf(w, "%8.1fs  %s\n", p.elapsed.Seconds(), p.pkg)
		}
	}
}

// framing tells the lines that -json's verbose mode adds and plain go
// test does not print.
func framing(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
