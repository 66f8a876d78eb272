package gateway

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestDockerLinkHTTP2: a share link over HTTP/2 (TLS, __Host- cookie) is
// exchanged, scoped and stripped as over HTTP/1.1, a cookie sent as two
// HTTP/2 cookie fields included (held; a regression test).
func TestDockerLinkHTTP2(t *testing.T) {
	cfg, mc := linkSetup(t)
	mc.Templates = func(name string) *config.Template { return cfg.Templates[name] }
	mgr, err := mgrtest.New(mc, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(cfg, mgr, Options{TLS: true, Records: mgr.Records}, testkit.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	mgr.SetListener(gw)
	t.Cleanup(gw.Close)
	s := NewServer(cfg, gw, testkit.Logger(t))
	s.TLSConfig = testkit.TLSConfig("h2", "http/1.1")
	srv := serve(t, s)
	if err := mgr.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	a := httptest.NewServer(admin.New(admin.Options{Config: func() *config.Config { return cfg }, Sandboxes: mgr, Settings: mgr.Records, Logs: mgr.Runtime.Capabilities().Logs, Log: testkit.Logger(t)}))
	t.Cleanup(a.Close)
	adm := a.URL
	id := dockertest.UniqueID("h2l")
	host := "sandbox-" + id + "." + testDomain
	c := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	do := func(path string, hdr ...string) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Host = host
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s: %s, want HTTP/2", path, resp.Proto)
		}
		return resp, string(b)
	}
	if resp, _ := do("/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d", resp.StatusCode)
	}
	pq, _ := mintLink(t, adm, id, `{"ttl":"10m","path":"/docs"}`)
	resp, _ := do(pq)
	cs := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || !strings.HasPrefix(cs[0].Name, "__Host-") {
		t.Fatalf("open link over HTTP/2: got %d %v", resp.StatusCode, cs)
	}
	cookie := cs[0].Name + "=" + cs[0].Value
	if resp, body := do("/docs/a", "Cookie", "app=1", "Cookie", cookie); resp.StatusCode != 200 || strings.Contains(body, cs[0].Value) || !strings.Contains(body, "app=1") {
		t.Errorf("link cookie in a second cookie field: got %d %.300s", resp.StatusCode, body)
	}
	if resp, body := do("/docs/%2e%2e/admin", "Cookie", cookie); resp.StatusCode != http.StatusForbidden {
		t.Errorf("/docs/%%2e%%2e/admin over HTTP/2: got %d %.200s, want 403", resp.StatusCode, body)
	}
}
