package links

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"
)

// keeper keeps one sandbox's links in memory.
type keeper struct{ ls []Link }

func (k *keeper) AddLink(_ context.Context, _ string, l Link) error {
	k.ls = append(k.ls, l)
	return nil
}

func (k *keeper) RevokeLink(_ context.Context, _, lid string, at time.Time) error {
	for i := range k.ls {
		if k.ls[i].ID == lid {
			k.ls[i].Revoked = at
			return nil
		}
	}
	return ErrNoLink
}

func (k *keeper) LoadLinks(context.Context, string) ([]Link, error) { return k.ls, nil }

func (k *keeper) Links(string) ([]Link, bool) { return k.ls, true }

func (k *keeper) RefreshLinks(context.Context, string) {}

// TestMintListRevoke: a minted link is kept (its digest, never its
// token), opens its path, lists until it expires, and stops opening once
// revoked; a path no request could be opened by is refused at mint.
func TestMintListRevoke(t *testing.T) {
	ctx := t.Context()
	k := &keeper{}
	now := time.Now()
	for _, bad := range []string{"docs", "//evil.example/", "/docs?x=1", "/docs#x", "/docs/../admin", "/docs/./x", "/%2e%2e/x"} {
		if _, _, err := Mint(ctx, k, "a", 3000, bad, now, now.Add(time.Hour)); !errors.Is(err, ErrPath) {
			t.Errorf("Mint path %q: got %v, want ErrPath", bad, err)
		}
	}
	l, tok, err := Mint(ctx, k, "a", 3000, "", now, now.Add(time.Hour))
	if err != nil || l.Path != "/" || len(k.ls) != 1 || k.ls[0].Digest != Digest(tok) || k.ls[0].Digest == tok {
		t.Fatalf("Mint: %+v %v, kept %+v", l, err, k.ls)
	}
	r := httptest.NewRequest("GET", "http://sandbox-a.example/x", nil)
	if _, err := Check(r, verifier(t), k, Target{Sandbox: "a", Port: 3000}, tok); err != nil {
		t.Errorf("Check of a minted link: %v", err)
	}
	if ls, err := List(ctx, k, "a", now.Add(2*time.Hour)); err != nil || len(ls) != 0 {
		t.Errorf("List after expiry: %v %v, want none", ls, err)
	}
	if err := Revoke(ctx, k, "a", l.ID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(r, verifier(t), k, Target{Sandbox: "a", Port: 3000}, tok); !errors.Is(err, ErrRevoked) {
		t.Errorf("Check of a revoked link: %v, want ErrRevoked", err)
	}
	if err := Revoke(ctx, k, "a", "lnone", now); !errors.Is(err, ErrNoLink) {
		t.Errorf("Revoke of no link: %v, want ErrNoLink", err)
	}
}
