package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/pages"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	plinks "github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/records"
)

// Per-sandbox settings and share links (#23) on the real engine, with two
// replicas that share nothing but their records store (dockerReplicaConfig),
// and a restart.

// syncBuf is a log sink tests read.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// linkReplica is a replica whose gateway logs (access log on) to logs,
// with an admin API.
type linkReplica struct {
	*replica
	admin *httptest.Server
}

func startLinkReplica(t *testing.T, cfg *config.Config, mc mgrtest.Config, logs io.Writer) *linkReplica {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testLogWriter(t)), &slog.HandlerOptions{Level: slog.LevelDebug}))
	mc.Templates = func(name string) *config.Template { return cfg.Templates[name] }
	mgr, err := mgrtest.New(mc, log)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(cfg, mgr, Options{Records: mgr.Records}, log)
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	mgr.SetListener(gw)
	t.Cleanup(gw.Close)
	srv := serve(t, NewServer(cfg, gw, log))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("manager start: %v", err)
	}
	t.Cleanup(func() { mgr.Close() })
	adm := httptest.NewServer(admin.New(admin.Options{Config: func() *config.Config { return cfg }, Sandboxes: mgr, Settings: mgr.Records, Logs: mgr.Runtime.Capabilities().Logs, Log: log}))
	t.Cleanup(adm.Close)
	return &linkReplica{replica: &replica{mgr: mgr, gw: gw, srv: srv}, admin: adm}
}

func testLogWriter(t *testing.T) io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

// adminCall sends method path body to an admin API with the admin token.
func adminCall(t *testing.T, base, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+linkAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

const linkAdminToken = "admin-token-for-links-0123456789"

// get sends GET path on host through srv with the extra headers.
func get(t *testing.T, srv *httptest.Server, host, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// openLink opens a share link on srv as a browser would: a page that
// tries again by itself (a link this replica has not read yet; the
// gateway re-reads its record meanwhile) is followed as the page does,
// pages.ReloadTries times at most. It returns the last answer and how
// many times the page tried again.
func openLink(t *testing.T, srv *httptest.Server, host, path string, hdr ...string) (*http.Response, string, int) {
	t.Helper()
	hdr = append(hdr, "Accept", "text/html")
	for tries := 0; ; tries++ {
		resp, body := get(t, srv, host, path, hdr...)
		if tries == pages.ReloadTries || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "location.reload()") || resp.Header.Get("Retry-After") != "1" {
			return resp, body, tries
		}
		time.Sleep(time.Second) // the page's pause
	}
}

// eventually polls f every 100ms until it is true or within passes.
func eventually(t *testing.T, within time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !f() {
		if time.Since(t0) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(t0)
}

func linkSetup(t *testing.T) (*config.Config, mgrtest.Config) {
	cfg, mc := dockerReplicaConfig(t)
	cfg.AdminToken = linkAdminToken
	cfg.Log.Access = true
	tpl := cfg.Templates["app"]
	tpl.Ports = []int{tpl.Port, 3001}
	mc.RecheckEvery = time.Second
	return cfg, mc
}

// TestDockerPublicToggleTwoReplicas: public set on one replica's admin API
// opens the sandbox to requests without a token on the other within the
// re-check bound, and closes it again.
func TestDockerPublicToggleTwoReplicas(t *testing.T) {
	cfg, mc := linkSetup(t)
	publicToggle(t, cfg, mc)
}

func publicToggle(t *testing.T, cfg *config.Config, mc mgrtest.Config) {
	var logs syncBuf
	a, b := startLinkReplica(t, cfg, mc, &logs), startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("pub")
	host := "sandbox-" + id + "." + testDomain
	if resp, _ := get(t, a.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "replica b knows the sandbox", func() bool { _, ok := b.mgr.Known(id); return ok })
	for _, r := range []*linkReplica{a, b} {
		if resp, _ := get(t, r.srv, host, "/"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("anonymous before the toggle: got %d, want 401", resp.StatusCode)
		}
	}
	if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":true}`); st != 200 || out["public"] != true {
		t.Fatalf("PATCH public: got %d %v", st, out)
	}
	if resp, _ := get(t, a.srv, host, "/"); resp.StatusCode != 200 {
		t.Fatalf("anonymous on the replica that toggled: got %d, want 200", resp.StatusCode)
	}
	took := eventually(t, 3*mc.RecheckEvery+5*time.Second, "public seen by replica b", func() bool {
		resp, _ := get(t, b.srv, host, "/")
		return resp.StatusCode == 200
	})
	t.Logf("public toggle seen by the other replica after %v (re-check every %v)", took, mc.RecheckEvery)
	if st, _ := adminCall(t, b.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":false}`); st != 200 {
		t.Fatalf("PATCH private: got %d", st)
	}
	eventually(t, 3*mc.RecheckEvery+5*time.Second, "private seen by replica a", func() bool {
		resp, _ := get(t, a.srv, host, "/")
		return resp.StatusCode == http.StatusUnauthorized
	})
	if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"public":"yes"}`); st != 400 {
		t.Errorf("PATCH public \"yes\": got %d %v, want 400", st, out)
	}
	if st, out := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/"+id, `{"keep_up":"100h"}`); st != 400 {
		t.Errorf("PATCH keep_up past max_keep_up: got %d %v, want 400", st, out)
	}
	if st, _ := adminCall(t, a.admin.URL, "PATCH", "/admin/sandboxes/nosuch"+id, `{"public":true}`); st != 404 {
		t.Errorf("PATCH of a missing sandbox: got %d, want 404", st)
	}
}

// mintLink mints a share link through an admin API and returns its URL's
// path and query (the host is the test's) and its id.
func mintLink(t *testing.T, base, id, body string) (pathQuery, linkID string) {
	t.Helper()
	st, out := adminCall(t, base, "POST", "/admin/sandboxes/"+id+"/links", body)
	if st != http.StatusCreated {
		t.Fatalf("POST links %s: got %d %v", body, st, out)
	}
	u, err := url.Parse(out["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI(), out["id"].(string)
}

// TestDockerShareLinks: a link opens its sandbox on its port under its
// path on the other replica at once, never reaches the sandbox or the
// access log, is refused elsewhere, stops on every replica once revoked
// (cookie included), stays revoked and valid after a restart, and says
// expired when it is.
func TestDockerShareLinks(t *testing.T) {
	cfg, mc := linkSetup(t)
	shareLinks(t, cfg, mc, func(id string) int {
		list, err := mc.Runtime.Records.ListRecords(context.Background(), map[string]string{records.LabelRecord: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	})
}

// shareLinks runs the share link checks on the runtime of mc; records
// counts what the runtime keeps for a sandbox.
func shareLinks(t *testing.T, cfg *config.Config, mc mgrtest.Config, records func(id string) int) {
	var logs syncBuf
	a, b := startLinkReplica(t, cfg, mc, &logs), startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("lnk")
	host := "sandbox-" + id + "." + testDomain
	if resp, _ := get(t, a.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	eventually(t, 10*time.Second, "replica b knows the sandbox", func() bool { _, ok := b.mgr.Known(id); return ok })

	pq, lid := mintLink(t, a.admin.URL, id, `{"ttl":"10m","path":"/docs"}`)
	secret := pq[strings.Index(pq, "=")+1:]
	// Opened on the other replica at once: it re-reads the record on
	// demand, the page trying again meanwhile.
	resp, _, tries := openLink(t, b.srv, host, pq)
	t.Logf("opened on the other replica after %d tries of the page", tries)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/docs" {
		t.Fatalf("open link: got %d Location %q, want 303 /docs", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || cookies[0].Value != secret || !cookies[0].HttpOnly {
		t.Fatalf("link cookie: got %v", cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	for _, r := range []*linkReplica{a, b} {
		resp, body := get(t, r.srv, host, "/docs/page?x=1&previewgate_link="+url.QueryEscape(secret), "Cookie", cookie+"; app=1")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("link again in the URL: got %d, want 303", resp.StatusCode)
		}
		resp, body = get(t, r.srv, host, "/docs/page?x=1", "Cookie", cookie+"; app=1")
		if resp.StatusCode != 200 {
			t.Fatalf("with the link cookie: got %d %s, want 200", resp.StatusCode, body)
		}
		if strings.Contains(body, secret) || strings.Contains(body, "previewgate_link") || !strings.Contains(body, "app=1") {
			t.Fatalf("the sandbox received the grant (or lost its own cookie): %s", body)
		}
	}
	// A WebSocket with the link cookie: from the preview's own origin
	// only (cross-site WebSocket hijacking).
	pqRoot, _ := mintLink(t, a.admin.URL, id, `{"ttl":"10m"}`)
	rootCookie := "previewgate_link=" + pqRoot[strings.Index(pqRoot, "=")+1:]
	// The page the app's WebSocket comes from is opened first (b reads
	// the new link meanwhile).
	if resp, _, _ := openLink(t, b.srv, host, pqRoot); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("open the root link on b: got %d, want 303", resp.StatusCode)
	}
	wsURL := "ws" + strings.TrimPrefix(b.srv.URL, "http") + "/ws"
	for origin, want := range map[string]bool{"http://" + host: true, "https://evil.example": false, "": false} {
		h := http.Header{"Cookie": {rootCookie}}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{Host: host, HTTPHeader: h})
		cancel()
		if c != nil {
			c.CloseNow()
		}
		if got := err == nil; got != want {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Errorf("WebSocket with the link cookie from origin %q: opened %v (%d, %v), want %v", origin, got, status, err, want)
		}
	}
	// Scope: path prefix on a segment boundary, port, sandbox.
	for _, c := range []struct{ host, path string }{
		{host, "/"}, {host, "/docsx"}, {"3001-" + host, "/docs"},
	} {
		if resp, body := get(t, b.srv, c.host, c.path, "Cookie", cookie, "Accept", "application/json"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"link_scope"`) {
			t.Errorf("%s%s with the link: got %d %s, want 403 link_scope", c.host, c.path, resp.StatusCode, body)
		}
	}
	if resp, body := get(t, b.srv, host, pages.StatusPath, "Cookie", cookie, "Accept", "application/json"); resp.StatusCode != 200 {
		t.Errorf("the waiting page's status with the link: got %d %s, want 200", resp.StatusCode, body)
	}
	// A path with a dot segment could never open its own URL: refused.
	for _, body := range []string{`{"path":"docs"}`, `{"path":"/docs?x=1"}`, `{"path":"/a/../docs"}`,
		`{"path":"/docs/."}`, `{"path":"/a/..;/docs"}`, `{"ttl":"-1m"}`, `{"ttl":"soon"}`, `{"nope":1}`, `not json`} {
		if st, out := adminCall(t, a.admin.URL, "POST", "/admin/sandboxes/"+id+"/links", body); st != 400 || out["code"] != "bad_request" {
			t.Errorf("POST links %s: got %d %v, want 400 bad_request", body, st, out)
		}
	}
	if resp, _ := get(t, b.srv, "sandbox-other"+id+"."+testDomain, "/docs", "Cookie", cookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another sandbox with the link: got %d, want 401", resp.StatusCode)
	}
	// Listing never shows a secret.
	st, out := adminCall(t, b.admin.URL, "GET", "/admin/sandboxes/"+id+"/links", "")
	if raw, _ := json.Marshal(out); st != 200 || !strings.Contains(string(raw), lid) || strings.Contains(string(raw), secret[20:]) || strings.Contains(string(raw), "digest") {
		t.Errorf("list: got %d %s", st, raw)
	}
	pq2, _ := mintLink(t, b.admin.URL, id, `{"ttl":"10m"}`)

	// Revoked on a, seen by b within the re-check bound, cookie included.
	if st, out := adminCall(t, a.admin.URL, "DELETE", "/admin/sandboxes/"+id+"/links/"+lid, ""); st != 200 {
		t.Fatalf("revoke: got %d %v", st, out)
	}
	took := eventually(t, 3*mc.RecheckEvery+5*time.Second, "revoke seen by replica b", func() bool {
		resp, _ := get(t, b.srv, host, "/docs", "Cookie", cookie)
		return resp.StatusCode == http.StatusGone
	})
	t.Logf("revoke seen by the other replica after %v (re-check every %v)", took, mc.RecheckEvery)
	if resp, body := get(t, b.srv, host, "/docs", "Cookie", cookie, "Accept", "application/json"); !strings.Contains(body, `"link_revoked"`) {
		t.Errorf("revoked, JSON: got %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, a.srv, host, pq, "Accept", "text/html"); resp.StatusCode != http.StatusGone || !strings.Contains(body, "revoked") {
		t.Errorf("revoked, HTML: got %d %s", resp.StatusCode, body)
	}

	// A restart (a new replica on the same engine) keeps both.
	b.mgr.Close()
	c := startLinkReplica(t, cfg, mc, &logs)
	if resp, _ := get(t, c.srv, host, "/docs", "Cookie", cookie); resp.StatusCode != http.StatusGone {
		t.Errorf("revoked link after a restart: got %d, want 410", resp.StatusCode)
	}
	if resp, _ := get(t, c.srv, host, pq2); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("valid link after a restart: got %d, want 303", resp.StatusCode)
	}

	// Expiry.
	pq3, _ := mintLink(t, a.admin.URL, id, `{"ttl":"1s"}`)
	time.Sleep(2100 * time.Millisecond)
	if resp, body := get(t, c.srv, host, pq3, "Accept", "application/json"); resp.StatusCode != http.StatusGone || !strings.Contains(body, `"link_expired"`) {
		t.Errorf("expired link: got %d %s, want 410 link_expired", resp.StatusCode, body)
	}
	if st, _ := adminCall(t, a.admin.URL, "POST", "/admin/sandboxes/"+id+"/links", `{"ttl":"48h"}`); st != 400 {
		t.Errorf("ttl past max_link_ttl: got %d, want 400", st)
	}
	if st, _ := adminCall(t, a.admin.URL, "POST", "/admin/sandboxes/"+id+"/links", `{"port":4000}`); st != 400 {
		t.Errorf("a port the template lacks: got %d, want 400", st)
	}
	// The grant is in no log line (access log on).
	if l := logs.String(); strings.Contains(l, secret) || !strings.Contains(l, "/docs/page") {
		t.Errorf("access log: the grant is there, or the requests are not")
	}

	// Bounded: 32 live links (the revoked one counts until it expires).
	full := false
	for range 40 {
		st, out := adminCall(t, a.admin.URL, "POST", "/admin/sandboxes/"+id+"/links", `{"ttl":"10m","path":"/`+strings.Repeat("p", 500)+`"}`)
		if st == http.StatusConflict && out["code"] == "too_many_links" {
			full = true
			break
		}
		if st != http.StatusCreated {
			t.Fatalf("minting up to the bound: got %d %v", st, out)
		}
	}
	if st, out := adminCall(t, a.admin.URL, "GET", "/admin/sandboxes/"+id+"/links", ""); !full || st != 200 || len(out["links"].([]any)) != plinks.MaxLinks {
		t.Errorf("at the bound: full %v, %d links listed, want %d", full, len(out["links"].([]any)), plinks.MaxLinks)
	}

	// Removing the sandbox removes its settings and links: its record
	// keeps only a removal mark for a while (sandboxmgr/tombstone.go).
	if n := records(id); n != 1 {
		t.Errorf("records of the sandbox: %d, want 1", n)
	}
	if st, _ := adminCall(t, a.admin.URL, "DELETE", "/admin/sandboxes/"+id, ""); st != 200 {
		t.Fatalf("remove sandbox: got %d", st)
	}
	if n := records(id); n != 1 {
		t.Errorf("records after remove: %d, want 1 (the removal mark)", n)
	}
	if s, err := b.mgr.Records.Load(t.Context(), id); err != nil || len(s.Links) != 0 || s.Public != nil {
		t.Errorf("settings after remove: %+v %v, want no links", s, err)
	}
}
