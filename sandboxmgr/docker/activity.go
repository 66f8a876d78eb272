package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
)

// netSamples remembers each container's network byte count and when it
// last changed, for LastActivity.
type netSamples struct {
	mu sync.Mutex // guards m
	m  map[string]netSample
}

type netSample struct {
	bytes   uint64
	changed time.Time
}

// LastActivity reads container c's network counters (one-shot stats) and
// returns when they were last seen to move. The first sample of a
// container counts as movement now: before it, nothing is known.
func (e *Runtime) LastActivity(ctx context.Context, _ string, c runtime.Instance) (time.Time, error) {
	if c.ID == "" {
		return time.Time{}, fmt.Errorf("stats: no container id")
	}
	resp, err := e.cli.ContainerStatsOneShot(ctx, c.ID)
	if err != nil {
		return time.Time{}, classify("stats "+c.ID, err, runtime.ErrNotFound)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return time.Time{}, fmt.Errorf("stats %s: %w", c.ID, err)
	}
	var n uint64
	for _, s := range st.Networks {
		n += s.RxBytes + s.TxBytes
	}
	now := time.Now()
	e.samples.mu.Lock()
	defer e.samples.mu.Unlock()
	if e.samples.m == nil {
		e.samples.m = make(map[string]netSample)
	}
	prev, ok := e.samples.m[c.ID]
	if !ok || prev.bytes != n {
		prev = netSample{bytes: n, changed: now}
		e.samples.m[c.ID] = prev
	}
	if len(e.samples.m) > 4096 { // containers come and go; forget old ones
		for id, s := range e.samples.m {
			if now.Sub(s.changed) > 24*time.Hour {
				delete(e.samples.m, id)
			}
		}
	}
	return prev.changed, nil
}

// SampleEarly: the counters need a baseline before a sandbox looks idle.
// They move with the app's own traffic too, so a sandbox that keeps
// talking (to anything) would never stop idle if they counted with one
// replica, whose own view is the whole truth: Capabilities declares them
// only with replicas.
func (e *Runtime) SampleEarly() bool { return true }

// RecordEvery: nothing is published; the counters are sampled.
func (e *Runtime) RecordEvery() time.Duration { return 0 }

// RecordActivity is never called (RecordEvery is 0).
func (e *Runtime) RecordActivity(context.Context, string, time.Time) error { return nil }
