package gateway

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// syncBuffer is a bytes.Buffer safe for the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAccessLogNamesSandboxAndItsTemplate (#21): an access log line names
// the sandbox and the template it was made from, not the default one.
func TestAccessLogNamesSandboxAndItsTemplate(t *testing.T) {
	t.Parallel()
	app := echoApp(t)
	cfg := testConfig()
	cfg.Log.Access = true
	own := *cfg.Templates["app"]
	own.Name = "own"
	cfg.Templates["own"] = &own
	cfg.ApplyDefaults()
	var buf syncBuffer
	eps := &endpoints{}
	eps.set("abc", strings.TrimPrefix(app.URL, "http://"), "i1")
	eps.mu.Lock()
	ep := eps.eps["abc"]
	ep.Template = "own"
	eps.eps["abc"] = ep
	eps.mu.Unlock()
	g, err := New(cfg, fakes(eps), Options{}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	srv := serve(t, NewServer(cfg, g, testkit.Logger(t)))
	resp := testkit.Request(t, srv, "GET", "sandbox-abc."+testDomain, "/x", testkit.Mint(t, cfg, "abc", time.Minute))
	if resp.StatusCode != 200 {
		t.Fatalf("got %d, want 200", resp.StatusCode)
	}
	testkit.WaitFor(t, "the access log line", func() bool { return strings.Contains(buf.String(), "msg=request") })
	line := buf.String()
	if !strings.Contains(line, "sandbox=abc template=own") {
		t.Errorf("got access log %q, want sandbox=abc template=own (the sandbox's own template, not the default)", line)
	}
}
