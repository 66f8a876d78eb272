package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// Attacks on share links (#23 review) as a hostile client, on the real
// engine: each request is sent byte for byte (no client cleans its path).

// linkTarget is one replica, one running sandbox and a link cookie for
// its path /docs on its main port.
type linkTarget struct {
	r            *linkReplica
	id, host     string
	cookie, addr string
}

func newLinkTarget(t *testing.T) *linkTarget {
	t.Helper()
	cfg, mc := linkSetup(t)
	var logs syncBuf
	r := startLinkReplica(t, cfg, mc, &logs)
	id := dockertest.UniqueID("rvw")
	host := "sandbox-" + id + "." + testDomain
	if resp, _ := get(t, r.srv, host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("create: got %d, want 200", resp.StatusCode)
	}
	pq, _ := mintLink(t, r.admin.URL, id, `{"ttl":"10m","path":"/docs"}`)
	resp, _ := get(t, r.srv, host, pq)
	if cs := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(cs) != 1 {
		t.Fatalf("open link: got %d %v", resp.StatusCode, cs)
	}
	c := resp.Cookies()[0]
	return &linkTarget{r: r, id: id, host: host, cookie: c.Name + "=" + c.Value, addr: strings.TrimPrefix(r.srv.URL, "http://")}
}

// raw sends head (a request line and headers, without the blank line)
// as is and returns the status and the first bytes of the body.
func (lt *linkTarget) raw(t *testing.T, head string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", lt.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, head+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", head, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// TestDockerLinkPathEscapes: a link for /docs opens nothing outside it,
// whatever spelling of a dot segment or separator the request uses.
func TestDockerLinkPathEscapes(t *testing.T) {
	lt := newLinkTarget(t)
	for _, p := range []string{
		"/docs/../admin", "/docs/./../admin", "/docs//../admin", "/docs/..",
		"/docs/%2e%2e/admin", "/docs/%2E%2E/admin", "/docs/.%2e/admin",
		"/docs%2f..%2fadmin", "/docs%2F..%2Fadmin", "/docs/..%2fadmin",
		"/docs/..\\admin", "/docs\\..\\admin", "/docs/..%5cadmin",
		"/docs/..;/admin", "/docs/.;/../admin", "/docs%2fadmin", "/%64ocs/../admin",
	} {
		st, body := lt.raw(t, "GET "+p+" HTTP/1.1\r\nHost: "+lt.host+"\r\nAccept: application/json\r\nCookie: "+lt.cookie)
		if st != http.StatusForbidden || !strings.Contains(body, `"link_scope"`) {
			t.Errorf("GET %s with a /docs link: got %d %.200s, want 403 link_scope", p, st, body)
		}
	}
	for _, p := range []string{"/docs", "/docs/", "/docs/a/b", "/docs/a%20b", "/docs/..a", "/docs/a..", "/docs/.well"} {
		if st, body := lt.raw(t, "GET "+p+" HTTP/1.1\r\nHost: "+lt.host+"\r\nCookie: "+lt.cookie); st != http.StatusOK {
			t.Errorf("GET %s with a /docs link: got %d %.200s, want 200", p, st, body)
		}
	}
}

// TestDockerLinkWebSocketOrigin: a link cookie alone does not open a
// WebSocket from another origin (cross-site WebSocket hijacking: a page
// of another sandbox is same-site), as the token cookie does not.
func TestDockerLinkWebSocketOrigin(t *testing.T) {
	lt := newLinkTarget(t)
	ws := "GET /docs/ws HTTP/1.1\r\nHost: " + lt.host + "\r\nCookie: " + lt.cookie +
		"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="
	for _, origin := range []string{"http://evil.example", "http://sandbox-other." + testDomain, ""} {
		h := ws
		if origin != "" {
			h += "\r\nOrigin: " + origin
		}
		if st, body := lt.raw(t, h); st != http.StatusForbidden && st != http.StatusUnauthorized {
			t.Errorf("WebSocket with the link cookie from origin %q: got %d %.200s, want refused (401 or 403)", origin, st, body)
		}
	}
	// A switch to another protocol would carry requests for any path on
	// one connection: the link for /docs does not open one, from its own
	// origin either (links promise 5).
	h2c := "GET /docs/x HTTP/1.1\r\nHost: " + lt.host + "\r\nCookie: " + lt.cookie +
		"\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nOrigin: http://" + lt.host
	if st, body := lt.raw(t, h2c); st != http.StatusForbidden && st != http.StatusUnauthorized {
		t.Errorf("h2c upgrade with the /docs link's cookie: got %d %.200s, want refused (401 or 403)", st, body)
	}
	// Its own origin still opens the socket (the testapp has no /docs/ws:
	// whatever it answers, the gateway let it through).
	if st, body := lt.raw(t, ws+"\r\nOrigin: http://"+lt.host); st == http.StatusForbidden || st == http.StatusUnauthorized {
		t.Errorf("WebSocket with the link cookie from its own origin: got %d %.200s", st, body)
	}
}

// TestDockerLinkNoExistenceOracle: an anonymous client with a made-up
// link gets the same answer whether the sandbox exists or not.
func TestDockerLinkNoExistenceOracle(t *testing.T) {
	lt := newLinkTarget(t)
	missing := "sandbox-gone" + lt.id + "." + testDomain
	for _, tok := range []string{"l000000000000.1.abc", "l000000000000.zzzzzzzz.abc", "garbage"} {
		var got [2]string
		for i, h := range []string{lt.host, missing} {
			st, body := lt.raw(t, "GET /docs?previewgate_link="+tok+" HTTP/1.1\r\nHost: "+h+"\r\nAccept: application/json")
			got[i] = fmt.Sprintf("%d %s", st, body)
		}
		if got[0] != got[1] {
			t.Errorf("made-up link %s: existing sandbox %q, missing one %q: want the same answer", tok, got[0], got[1])
		}
	}
}

// TestDockerLinkDiesWithSandbox: a sandbox removed behind the gateway's
// back (docker rm) and created again under the same id is a new sandbox:
// the old one's links do not open it, even before a re-check runs.
func TestDockerLinkDiesWithSandbox(t *testing.T) {
	lt := newLinkTarget(t)
	if st, _ := lt.raw(t, "GET /docs HTTP/1.1\r\nHost: "+lt.host+"\r\nCookie: "+lt.cookie); st != 200 {
		t.Fatalf("link before: got %d, want 200", st)
	}
	cli := dockertest.Client(t)
	for _, c := range dockertest.Containers(t, cli, "previewgate.sandbox="+lt.id) {
		if err := cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := linkSetup(t)
	if resp, _ := get(t, lt.r.srv, lt.host, "/", "Authorization", "Bearer "+testkit.Mint(t, cfg, lt.id, time.Minute)); resp.StatusCode != 200 {
		t.Fatalf("re-create: got %d, want 200", resp.StatusCode)
	}
	if st, body := lt.raw(t, "GET /docs HTTP/1.1\r\nHost: "+lt.host+"\r\nCookie: "+lt.cookie); st == 200 {
		t.Errorf("the removed sandbox's link on the new one: got %d %.200s, want refused", st, body)
	}
	if st, out := adminCall(t, lt.r.admin.URL, "GET", "/admin/sandboxes/"+lt.id+"/links", ""); st != 200 || fmt.Sprint(out["links"]) != "[]" {
		t.Errorf("links of the new sandbox: got %d %v, want none", st, out)
	}
}

// TestDockerLinkRevocableAtTheBound: links with long paths ("&" takes 6
// bytes in the record's JSON) fill a sandbox's record to its last byte; every one of them can still be
// revoked, and the public toggle still set.
func TestDockerLinkRevocableAtTheBound(t *testing.T) {
	lt := newLinkTarget(t)
	mint := func(n int) (int, string) {
		st, out := adminCall(t, lt.r.admin.URL, "POST", "/admin/sandboxes/"+lt.id+"/links",
			`{"ttl":"10m","path":"/`+strings.Repeat("&", n)+`"}`)
		id, _ := out["id"].(string)
		return st, id
	}
	var ids []string
	for n := 500; n > 0 && len(ids) < 40; {
		st, id := mint(n)
		if st == http.StatusCreated {
			ids = append(ids, id)
			continue
		}
		if st != http.StatusConflict {
			t.Fatalf("mint into a full record: got %d, want 409 too_many_links", st)
		}
		n /= 2 // fill what is left with shorter paths
	}
	t.Logf("%d links minted", len(ids))
	for _, id := range ids {
		if st, out := adminCall(t, lt.r.admin.URL, "DELETE", "/admin/sandboxes/"+lt.id+"/links/"+id, ""); st != 200 {
			t.Fatalf("revoke %s of a full record: got %d %v, want 200", id, st, out)
		}
	}
	if st, out := adminCall(t, lt.r.admin.URL, "PATCH", "/admin/sandboxes/"+lt.id, `{"public":false,"keep_up_until":"`+time.Now().Add(time.Hour).Format(time.RFC3339Nano)+`"}`); st != 200 {
		t.Errorf("PATCH a full record: got %d %v, want 200", st, out)
	}
}

// TestDockerLinkCookieTossed: without TLS at the gateway the link cookie
// has no __Host- prefix, so another sandbox's page can set one of that
// name for the whole domain (cookie tossing); sent before the user's own,
// it must not lock the user out of the sandbox their link opens.
func TestDockerLinkCookieTossed(t *testing.T) {
	lt := newLinkTarget(t)
	name, _, _ := strings.Cut(lt.cookie, "=")
	for _, tossed := range []string{"l000000000000.zzzzzzzz.abc", "l000000000000.1.abc", "junk"} {
		st, body := lt.raw(t, "GET /docs HTTP/1.1\r\nHost: "+lt.host+"\r\nCookie: "+name+"="+tossed+"; "+lt.cookie)
		if st != http.StatusOK {
			t.Errorf("a tossed link cookie %s before the user's: got %d %.200s, want 200", tossed, st, body)
		}
		if strings.Contains(body, tossed) {
			t.Errorf("the tossed cookie reached the sandbox: %.300s", body)
		}
	}
}

// TestDockerLinkNeverCreates: once the sandbox is removed behind the
// gateway's back, neither its link cookie nor its "public": true creates
// it again (held before this review; kept as a regression test).
func TestDockerLinkNeverCreates(t *testing.T) {
	lt := newLinkTarget(t)
	if st, out := adminCall(t, lt.r.admin.URL, "PATCH", "/admin/sandboxes/"+lt.id, `{"public":true}`); st != 200 {
		t.Fatalf("PATCH public: got %d %v", st, out)
	}
	cli := dockertest.Client(t)
	for _, c := range dockertest.Containers(t, cli, "previewgate.sandbox="+lt.id) {
		if err := cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, hdr := range []string{"\r\nCookie: " + lt.cookie, ""} {
		if st, body := lt.raw(t, "GET /docs HTTP/1.1\r\nHost: "+lt.host+"\r\nAccept: application/json"+hdr); st == 200 {
			t.Errorf("after the sandbox was removed (%q): got %d %.200s, want refused", hdr, st, body)
		}
	}
	if n := len(dockertest.Containers(t, cli, "previewgate.sandbox="+lt.id)); n != 0 {
		t.Errorf("containers of the removed sandbox: %d, want 0 (created again)", n)
	}
}
