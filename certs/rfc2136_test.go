package certs

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libdns/libdns"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/acmetest"
)

func TestRFC2136(t *testing.T) {
	t.Parallel()
	secret := base64.StdEncoding.EncodeToString([]byte("a shared secret of enough length"))
	d := acmetest.StartDNS(t, "zone.test", "upd-key", secret)
	ctx := context.Background()
	name := "_acme-challenge.sandbox-a.zone.test"

	p, err := NewRFC2136(config.RFC2136{Server: d.Addr, TSIGKey: "upd-key", TSIGSecret: config.Secret(secret), TSIGAlg: "hmac-sha256"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 300) // more than one TXT string
	recs := []libdns.Record{
		libdns.TXT{Name: "_acme-challenge.sandbox-a", Text: "token-1", TTL: time.Minute},
		libdns.RR{Name: "_acme-challenge.sandbox-a", Type: "TXT", Data: long},
	}
	got, err := p.AppendRecords(ctx, "zone.test.", recs)
	if err != nil {
		t.Fatalf("AppendRecords: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("AppendRecords returned %d records, want 2", len(got))
	}
	if _, ok := got[1].(libdns.TXT); !ok {
		t.Errorf("AppendRecords: got %T, want libdns.TXT", got[1])
	}
	if v := d.TXT(name); !slices.Equal(v, []string{"token-1", long}) {
		t.Errorf("TXT after append: got %q, want both values", v)
	}

	if _, err := p.DeleteRecords(ctx, "zone.test.", recs[:1]); err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	if v := d.TXT(name); !slices.Equal(v, []string{long}) {
		t.Errorf("TXT after deleting one: got %q, want the other", v)
	}
	if _, err := p.DeleteRecords(ctx, "zone.test.", []libdns.Record{libdns.RR{Name: "_acme-challenge.sandbox-a", Type: "TXT"}}); err != nil {
		t.Fatalf("DeleteRecords rrset: %v", err)
	}
	if v := d.TXT(name); len(v) != 0 {
		t.Errorf("TXT after deleting the RRset: got %q, want none", v)
	}

	t.Run("wrong secret refused", func(t *testing.T) {
		wrong := base64.StdEncoding.EncodeToString([]byte("not the shared secret at all...."))
		bad, err := NewRFC2136(config.RFC2136{Server: d.Addr, TSIGKey: "upd-key", TSIGSecret: config.Secret(wrong)})
		if err != nil {
			t.Fatal(err)
		}
		_, refusedBefore := d.Counts()
		if _, err := bad.AppendRecords(ctx, "zone.test.", recs[:1]); err == nil {
			t.Errorf("AppendRecords with a wrong secret: got nil error")
		}
		if _, refused := d.Counts(); refused != refusedBefore+1 {
			t.Errorf("server refused %d updates, want %d", refused, refusedBefore+1)
		}
		if v := d.TXT(name); len(v) != 0 {
			t.Errorf("TXT after refused update: got %q, want none", v)
		}
	})
}

func TestNewRFC2136Errors(t *testing.T) {
	t.Parallel()
	ok := config.RFC2136{Server: "ns.example:53", TSIGKey: "k", TSIGSecret: "c2VjcmV0"}
	tests := []struct {
		name string
		mod  func(*config.RFC2136)
	}{
		{"no server", func(c *config.RFC2136) { c.Server = "" }},
		{"no key", func(c *config.RFC2136) { c.TSIGKey = "" }},
		{"secret not base64", func(c *config.RFC2136) { c.TSIGSecret = "%%%" }},
		{"md5", func(c *config.RFC2136) { c.TSIGAlg = "hmac-md5" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			if _, err := NewRFC2136(c); err == nil {
				t.Errorf("got nil error, want one")
			}
		})
	}
	p, err := NewRFC2136(config.RFC2136{Server: "ns.example", TSIGKey: "K", TSIGSecret: "c2VjcmV0", TSIGAlg: "HMAC-SHA512."})
	if err != nil {
		t.Fatal(err)
	}
	if p.Server != "ns.example:53" {
		t.Errorf("server: got %q, want port 53 added", p.Server)
	}
}
