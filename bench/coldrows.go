package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"
)

// Idle WebSocket memory and cold-start rows.

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
	rss, heap, leak := nan3(), nan3(), nan3()
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
	v := nan3()
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
	return errors.Join(pprof.WriteHeapProfile(fh), fh.Close())
}
