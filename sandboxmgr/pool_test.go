package sandboxmgr

import (
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func waitPool(t *testing.T, m *Manager, tpl string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.PoolSize(tpl) != want {
		if time.Now().After(deadline) {
			t.Fatalf("got pool %d, want %d", m.PoolSize(tpl), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPoolClaimRefillRestart(t *testing.T) {
	tpl := appListener(t)
	tpl.Pool = 2
	cfg := Config{
		ListTemplates: func() []*config.Template { return []*config.Template{tpl} },
		Templates:     func(string) *config.Template { return tpl },
		PoolEvery:     10 * time.Millisecond,
		ReapEvery:     -1,
	}
	f := newFake()
	m := New(cfg, f, nil, nil)
	defer m.Close()
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m, tpl.Name, 2)

	charged := 0
	ep, err := m.EnsureWith(t.Context(), "new", tpl, Options{OnCreate: func() error { charged++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Lookup(t.Context(), ContainerName("new"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "id-previewgate-pool-fake-") || c.Labels[runtime.LabelPool] != "fake" {
		t.Errorf("got container %s labels %v, want a claimed pool container", c.ID, c.Labels)
	}
	if charged != 1 {
		t.Errorf("got %d OnCreate calls for a claim, want 1", charged)
	}
	waitPool(t, m, tpl.Name, 2) // refilled

	// A restarted manager adopts the claim by its name and the pool.
	m.Close()
	creates := f.creates.Load()
	m2 := New(cfg, f, nil, nil)
	defer m2.Close()
	if err := m2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ep2, err := m2.Ensure(t.Context(), "new", tpl)
	if err != nil {
		t.Fatal(err)
	}
	if ep2.Addr != ep.Addr {
		t.Errorf("got %s after restart, want %s", ep2.Addr, ep.Addr)
	}
	if m2.PoolSize(tpl.Name) != 2 {
		t.Errorf("got pool %d after restart, want 2 adopted", m2.PoolSize(tpl.Name))
	}
	time.Sleep(50 * time.Millisecond) // a few pool ticks: nothing to fill
	if got := f.creates.Load(); got != creates {
		t.Errorf("got %d creates after restart, want none", got-creates)
	}
}

// A pool container made from an older image is not claimed.
func TestPoolSkipsStaleImage(t *testing.T) {
	m, f := newFakeManager(t, Config{ReapEvery: -1})
	tpl := appListener(t)
	tpl.Pool = 1
	f.put("previewgate-pool-fake-old", runtime.StateRunning, map[string]string{runtime.LabelManaged: "true", runtime.LabelPool: "fake", runtime.LabelPort: itoa(tpl.Port)})
	f.ctrs["previewgate-pool-fake-old"].Image = "fake:old"
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m.PoolSize("fake") != 1 {
		t.Fatalf("got pool %d, want the running pool container adopted", m.PoolSize("fake"))
	}
	if _, err := m.Ensure(t.Context(), "x", tpl); err != nil {
		t.Fatal(err)
	}
	c, _ := f.Lookup(t.Context(), ContainerName("x"))
	if c.Labels[runtime.LabelPool] != "" {
		t.Errorf("claimed a pool container of an older image")
	}
}
