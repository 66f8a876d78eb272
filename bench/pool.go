package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// poolSize is the warm pool of the "pooled" template.
const poolSize = 2

// coldKinds counts the manager's cold starts by kind (wake, create, pool),
// to prove that a pool row's requests were claims, not creates. It is the
// manager's sandboxmgr.Observer.
type coldKinds struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (c *coldKinds) ColdStart(kind string, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[kind]++
}

// WakePhase is not counted: the bench reads cold starts by kind only.
func (c *coldKinds) WakePhase(string, string, time.Duration) {}

func (c *coldKinds) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

// pct is the nearest-rank p-th percentile of d in ms (NaN when empty).
func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return math.NaN()
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return float64(s[max(0, min(i, len(s)-1))]) / 1e6
}

// pair is a p50 and a p99 row for the same operation, direct and gateway.
func pair(name string, direct, gw []time.Duration, note string) []row {
	nan := math.NaN()
	return []row{
		{name: name + " p50 ms", v: [3]float64{pct(direct, 50), pct(gw, 50), nan}, note: note},
		{name: name + " p99 ms", v: [3]float64{pct(direct, 99), pct(gw, 99), nan},
			note: fmt.Sprintf("%d samples each; nearest rank", len(gw))},
	}
}

// runningRows: first byte from a running sandbox on a new TCP connection
// each time, the same GET sent directly and through the gateway, so the
// cold rows below have their floor in the same table. It uses a sandbox of
// its own: the earlier row groups leave tens of thousands of connections
// to the "bench" container in TIME_WAIT, which can exhaust the ephemeral
// ports towards that one address.
func (b *bench) runningRows(k int) error {
	logf("cold start: running sandbox first byte (%d samples)", k)
	host := "sandbox-running." + b.domain
	if err := b.get(b.gwPlain, host, "/"); err != nil {
		return fmt.Errorf("create the running sandbox: %w", err)
	}
	ep, err := b.mgr.Ensure(b.ctx, "running", b.tpl)
	if err != nil {
		return err
	}
	var direct, gw []time.Duration
	for range k {
		t0 := time.Now()
		if err := firstByte(ep.Addr, host, "/"); err != nil {
			return fmt.Errorf("direct first byte: %w", err)
		}
		direct = append(direct, time.Since(t0))
		t0 = time.Now()
		if err := firstByte(b.gwPlain, host, "/", "Cookie: "+b.cookie); err != nil {
			return fmt.Errorf("gateway first byte: %w", err)
		}
		gw = append(gw, time.Since(t0))
	}
	b.rows = append(b.rows, pair("running sandbox (floor of the cold rows), first byte", direct, gw,
		"new TCP connection + GET / each time")...)
	return nil
}

// waitPool waits until the pooled template has poolSize ready containers
// and returns how long that took.
func (b *bench) waitPool(within time.Duration) (time.Duration, error) {
	t0 := time.Now()
	for b.mgr.PoolSize(b.poolTpl.Name) < poolSize {
		if time.Since(t0) > within {
			return 0, fmt.Errorf("warm pool has %d of %d ready containers after %v",
				b.mgr.PoolSize(b.poolTpl.Name), poolSize, within)
		}
		select {
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return time.Since(t0), nil
}

// poolRows: a brand-new id whose template keeps a warm pool of two,
// first byte through the gateway (claim: rename the ready container, probe,
// proxy), next to the raw Docker time of the same operation: rename an
// already-running, already-serving container and GET it directly on a new
// connection. Before each sample the pool is back at full size, so every
// sample is a claim; the refill time after each claim is reported.
func (b *bench) poolRows(k int) error {
	logf("cold start: claim new ids from a warm pool of %d (%d samples)", poolSize, k)
	b.poolOn.Store(true)
	defer b.poolOn.Store(false)
	if _, err := b.waitPool(2 * time.Minute); err != nil {
		return err
	}
	labels := benchLabels(b.run)
	claims0, creates0 := b.kinds.get("pool"), b.kinds.get("create")
	var direct, gw, refill []time.Duration
	for i := range k {
		id := fmt.Sprintf("pool-%d", i)
		t0 := time.Now()
		if err := firstByte(b.gwPlain, "sandbox-"+id+"."+b.domain, "/", "Cookie: previewgate_token="+b.tokenPool); err != nil {
			return fmt.Errorf("pool claim through the gateway: %w", err)
		}
		gw = append(gw, time.Since(t0))
		took, err := b.waitPool(time.Minute)
		if err != nil {
			return err
		}
		refill = append(refill, took)
		if err := b.mgr.Remove(b.ctx, id); err != nil {
			return err
		}

		d, err := b.rawClaim(i, labels)
		if err != nil {
			return err
		}
		direct = append(direct, d)
	}
	claims, creates := b.kinds.get("pool")-claims0, b.kinds.get("create")-creates0
	b.rows = append(b.rows, pair("warm-pool claim, new id, first byte", direct, gw,
		fmt.Sprintf("direct = docker rename of a running container + GET on a new connection; "+
			"%d of %d gateway samples claimed from the pool, %d created; pool back to %d in p50 %.0f ms",
			claims, k, creates, poolSize, pct(refill, 50)))...)
	return nil
}

// rawClaim readies a container outside the clock, then times the claim a
// minimal orchestrator would make: rename it, GET it.
func (b *bench) rawClaim(i int, labels map[string]string) (time.Duration, error) {
	r := &rawContainer{c: b.dc, name: fmt.Sprintf("pgbench-rawpool-%s-%d", b.run, i), network: b.netName}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	defer r.remove(context.WithoutCancel(ctx))
	if err := r.create(ctx, b.image, labels); err != nil {
		return 0, err
	}
	if err := r.startAndServe(ctx); err != nil {
		return 0, fmt.Errorf("raw pool container: %w", err)
	}
	addr, err := r.address(ctx)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := r.rename(ctx, fmt.Sprintf("pgbench-rawclaimed-%s-%d", b.run, i)); err != nil {
		return 0, fmt.Errorf("raw rename: %w", err)
	}
	if err := firstByte(addr, "raw", "/"); err != nil {
		return 0, fmt.Errorf("raw claim first byte: %w", err)
	}
	return time.Since(t0), nil
}
