package links

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
)

// fakeRecords is a Records whose copy is fresh or not; refresh, if set,
// is what a reload finds, seen by the next request (a reload does not
// hold the one that asked). It counts reloads.
type fakeRecords struct {
	kept     []Link
	fresh    bool
	refresh  *[]Link
	reloads  int
	reloaded bool // a reload makes the copy fresh
}

func (f *fakeRecords) Links(string) ([]Link, bool) { return f.kept, f.fresh }

func (f *fakeRecords) RefreshLinks(context.Context, string) {
	f.reloads++
	if f.refresh != nil {
		f.kept = *f.refresh
	}
	f.fresh = f.fresh || f.reloaded
}

func verifier(t *testing.T) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(config.Auth{Audience: "previewgate",
		Keys: []config.Key{{KID: "k1", Alg: "HS256", Secret: "0123456789abcdef0123456789abcdef"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// mint returns a link token expiring at exp and its record.
func mint(t *testing.T, exp time.Time, port int, path string) (string, Link) {
	t.Helper()
	id, tok, digest, err := newToken(exp)
	if err != nil {
		t.Fatal(err)
	}
	return tok, Link{ID: id, Digest: digest, Port: port, Path: path, Expires: exp}
}

func get(path string) *http.Request {
	return httptest.NewRequest(http.MethodGet, "http://sandbox-a.example.com"+path, nil)
}

var target = Target{Sandbox: "a", Port: 3000}

// TestCheck: access only on a kept record that matches in every part.
func TestCheck(t *testing.T) {
	v := verifier(t)
	now := time.Now()
	tok, l := mint(t, now.Add(time.Hour), 3000, "/docs")
	other, _ := mint(t, now.Add(time.Hour), 3000, "/")
	past, lPast := mint(t, now.Add(-time.Minute), 3000, "/")
	revoked := l
	revoked.Revoked = now
	forged := l
	forged.Digest = Digest(other)
	for _, c := range []struct {
		name string
		recs []Link
		tok  string
		r    *http.Request
		tg   Target
		want error
	}{
		{"grants under its path", []Link{l}, tok, get("/docs/a"), target, nil},
		{"garbage", []Link{l}, "not-a-link", get("/docs"), target, ErrInvalid},
		{"unknown", []Link{l}, other, get("/docs"), target, ErrInvalid},
		{"digest mismatch", []Link{forged}, tok, get("/docs"), target, ErrInvalid},
		{"revoked", []Link{revoked}, tok, get("/docs"), target, ErrRevoked},
		{"expired record", []Link{lPast}, past, get("/"), target, ErrExpired},
		{"expired, pruned", nil, past, get("/"), target, ErrExpired},
		{"other path", []Link{l}, tok, get("/docsx"), target, ErrScope},
		{"dot segment out", []Link{l}, tok, get("/docs/%2e%2e/admin"), target, ErrScope},
		{"other port", []Link{l}, tok, get("/docs"), Target{Sandbox: "a", Port: 8000}, ErrScope},
		{"status stream", []Link{l}, tok, get("/_previewgate/status"), Target{Sandbox: "a", Port: 3000, AnyPath: true}, nil},
		{"no sandbox", []Link{l}, tok, get("/docs"), Target{Port: 3000}, ErrInvalid},
		{"no sandbox, expired token", nil, past, get("/"), Target{Port: 3000}, ErrExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := &fakeRecords{kept: c.recs, fresh: true}
			got, err := Check(c.r, v, recs, c.tg, c.tok)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if err == nil && (!got.Expires.Equal(l.Expires) || got.ID != l.ID) {
				t.Errorf("granted %s until %v, want the record's %s until %v", got.ID, got.Expires, l.ID, l.Expires)
			}
			if c.tg.Sandbox == "" && recs.reloads != 0 {
				t.Errorf("%d reloads for no sandbox, want none", recs.reloads)
			}
		})
	}
}

// TestCheckReloads: an unknown link starts a reload of the records (a
// link minted on another replica) and is refused as unknown, as for a
// sandbox that does not exist; the next request, after the reload, is
// granted. A stale copy grants nothing until a reload freshens it.
func TestCheckReloads(t *testing.T) {
	v := verifier(t)
	tok, l := mint(t, time.Now().Add(time.Hour), 3000, "/")
	minted := []Link{l}

	recs := &fakeRecords{fresh: true, refresh: &minted}
	if _, err := Check(get("/"), v, recs, target, tok); !errors.Is(err, ErrUnknown) || recs.reloads != 1 {
		t.Errorf("minted elsewhere, first request: err %v after %d reloads, want ErrUnknown and 1 reload", err, recs.reloads)
	}
	if _, err := Check(get("/"), v, recs, Target{Port: 3000}, tok); !errors.Is(err, ErrUnknown) {
		t.Errorf("no such sandbox: err %v, want ErrUnknown, as for an existing one", err)
	}
	if _, err := Check(get("/"), v, recs, target, tok); err != nil || recs.reloads != 1 {
		t.Errorf("minted elsewhere, next request: err %v after %d reloads, want a grant and no other reload", err, recs.reloads)
	}
	recs = &fakeRecords{kept: minted}
	if _, err := Check(get("/"), v, recs, target, tok); !errors.Is(err, ErrUnavailable) {
		t.Errorf("stale copy: err %v, want ErrUnavailable", err)
	}
	recs = &fakeRecords{kept: minted, reloaded: true}
	_, err := Check(get("/"), v, recs, target, tok)
	if _, err2 := Check(get("/"), v, recs, target, tok); !errors.Is(err, ErrUnavailable) || err2 != nil || recs.reloads != 1 {
		t.Errorf("stale copy reloaded: err %v then %v after %d reloads, want ErrUnavailable, then a grant after 1", err, err2, recs.reloads)
	}
}

// TestCheckUpgradeOrigin: a link's WebSocket comes from the preview's own
// origin only, as a token cookie's.
func TestCheckUpgradeOrigin(t *testing.T) {
	v := verifier(t)
	tok, l := mint(t, time.Now().Add(time.Hour), 3000, "/")
	recs := &fakeRecords{kept: []Link{l}, fresh: true}
	up := Target{Sandbox: "a", Port: 3000, Upgrade: true}
	for origin, want := range map[string]error{
		"http://sandbox-a.example.com": nil,
		"http://sandbox-b.example.com": auth.ErrOrigin,
		"":                             auth.ErrOrigin,
	} {
		r := get("/ws")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if _, err := Check(r, v, recs, up, tok); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("Origin %q: err %v, want %v", origin, err, want)
		}
	}
}

// TestGrantCookies: a link cookie another sandbox's page tossed does not
// shadow the user's own; with none that opens, the most telling refusal.
func TestGrantCookies(t *testing.T) {
	v := verifier(t)
	now := time.Now()
	mine, l := mint(t, now.Add(time.Hour), 3000, "/")
	tossed, _ := mint(t, now.Add(time.Hour), 3000, "/")
	gone, lGone := mint(t, now.Add(time.Hour), 3000, "/")
	lGone.Revoked = now
	recs := &fakeRecords{kept: []Link{l, lGone}, fresh: true}
	cookies := func(vals ...string) *http.Request {
		r := get("/")
		for _, c := range vals {
			r.AddCookie(&http.Cookie{Name: auth.LinkParam, Value: c})
		}
		return r
	}
	if _, err := Grant(cookies(tossed, mine), v, recs, target, tossed, false); err != nil {
		t.Errorf("tossed cookie first: %v, want the user's own to grant", err)
	}
	if _, err := Grant(cookies(tossed, gone), v, recs, target, tossed, false); !errors.Is(err, ErrRevoked) {
		t.Errorf("no cookie opens: %v, want ErrRevoked over ErrInvalid", err)
	}
	if _, err := Grant(cookies(mine), v, recs, target, tossed, true); !errors.Is(err, ErrInvalid) {
		t.Errorf("a link in the query: %v, want its own refusal, no cookie tried", err)
	}
}

// TestCheckUpgradeProtocol: a link for a path below "/" opens a WebSocket
// but no other protocol switch (h2c, or a list that offers one), which
// would carry requests for any path; a link for "/" opens any.
func TestCheckUpgradeProtocol(t *testing.T) {
	v := verifier(t)
	docs, lDocs := mint(t, time.Now().Add(time.Hour), 3000, "/docs")
	root, lRoot := mint(t, time.Now().Add(time.Hour), 3000, "/")
	recs := &fakeRecords{kept: []Link{lDocs, lRoot}, fresh: true}
	up := Target{Sandbox: "a", Port: 3000, Upgrade: true}
	for _, tt := range []struct {
		tok, upgrade string
		want         error
	}{
		{docs, "websocket", nil},
		{docs, "WebSocket", nil},
		{docs, "h2c", ErrScope},
		{docs, "websocket, h2c", ErrScope},
		{root, "h2c", nil},
	} {
		r := get("/docs/ws")
		r.Header.Set("Origin", "http://sandbox-a.example.com")
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", tt.upgrade)
		if _, err := Check(r, v, recs, up, tt.tok); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("link %s, Upgrade %q: err %v, want %v", map[bool]string{true: "/docs", false: "/"}[tt.tok == docs], tt.upgrade, err, tt.want)
		}
	}
}

// TestHolds: a stream's link is asked again by the cached copy only: it
// ends when the link is revoked, expires, leaves the record, or the copy
// goes stale.
func TestHolds(t *testing.T) {
	now := time.Now()
	_, live := mint(t, now.Add(time.Minute), 3000, "/")
	revoked := live
	revoked.Revoked = now
	_, ended := mint(t, now.Add(-time.Second), 3000, "/")
	for _, c := range []struct {
		name  string
		kept  []Link
		fresh bool
		lid   string
		want  error
	}{
		{"live", []Link{live}, true, live.ID, nil},
		{"revoked", []Link{revoked}, true, live.ID, ErrRevoked},
		{"revoked, stale copy", []Link{revoked}, false, live.ID, ErrRevoked},
		{"expired", []Link{ended}, true, ended.ID, ErrExpired},
		{"gone from the record", []Link{ended}, true, live.ID, ErrInvalid},
		{"stale copy", []Link{live}, false, live.ID, ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := &fakeRecords{kept: c.kept, fresh: c.fresh}
			if err := Holds(recs, "a", c.lid, now); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("got %v, want %v", err, c.want)
			}
			if recs.reloads != 0 {
				t.Errorf("%d reloads, want none", recs.reloads)
			}
		})
	}
}
