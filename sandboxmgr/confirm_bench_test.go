package sandboxmgr_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/k8stest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/kube"
)

// BenchmarkDockerConfirm and BenchmarkKubernetesConfirm measure what the
// confirmation of a new upstream connection costs (#37, BENCHMARKS.md):
// one running sandbox, then per iteration a TCP dial to its endpoint
// ("dial", what a new connection cost before), the runtime read alone
// ("confirm": one inspect, or one GET of the pod), or both in sequence,
// as the gateway now does ("dial+confirm"). Each confirm is one runtime
// call (calls/op).
func BenchmarkDockerConfirm(b *testing.B) {
	m, err := mgrtest.New(mgrtest.Config{Config: sandboxmgr.Config{Network: dockertest.Network(b), Labels: dockertest.ScopedLabels()},
		Runtime: mgrtest.Runtime{Records: dockertest.Records(b)}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	benchConfirm(b, m.Manager, benchTemplate(b))
}

func BenchmarkKubernetesConfirm(b *testing.B) {
	c := k8stest.Start(b)
	ns := c.NewNamespace(b)
	k8stest.StartAgent(b, c.Admin(b), ns, dockertest.Network(b))
	kc := kube.Config{Namespace: ns, REST: c.Config(c.AdminToken)}
	m, err := mgrtest.New(mgrtest.Config{Config: sandboxmgr.Config{Network: "previewgate-sandboxes",
		Labels: map[string]string{dockertest.LabelTest: "1", dockertest.LabelRun: dockertest.RunID()}},
		Runtime: mgrtest.Runtime{Kube: &kc}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	benchConfirm(b, m.Manager, benchTemplate(b))
}

func benchTemplate(b *testing.B) *config.Template {
	return &config.Template{Name: "testapp", Image: dockertest.TestAppImage(b), Port: 3000,
		Ready: config.Ready{Path: "/", Timeout: config.Duration(30 * time.Second)}}
}

// benchConfirm wakes a sandbox on m and runs the three sub-benchmarks.
func benchConfirm(b *testing.B, m *sandboxmgr.Manager, tpl *config.Template) {
	id := "bench-" + dockertest.UniqueID("c")
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	ep, err := m.Ensure(ctx, id, tpl)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Remove(context.Background(), id)
	h := m.Sandbox(id)
	dial := func(b *testing.B) {
		c, err := net.Dial("tcp", ep.Addr)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	confirm := func(b *testing.B) {
		if err := h.Confirm(b.Context(), ep.Instance, ep.Addr); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("dial", func(b *testing.B) {
		for b.Loop() {
			dial(b)
		}
	})
	b.Run("confirm", func(b *testing.B) {
		for b.Loop() {
			confirm(b)
		}
		b.ReportMetric(1, "calls/op")
	})
	b.Run("dial+confirm", func(b *testing.B) {
		for b.Loop() {
			dial(b)
			confirm(b)
		}
		b.ReportMetric(1, "calls/op")
	})
}
