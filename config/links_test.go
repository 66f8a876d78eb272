package config

import (
	"strings"
	"testing"
	"time"
)

// TestLinkKeys: share link lifetimes and max_keep_up have their defaults,
// and a default lifetime past the maximum is refused at its line.
func TestLinkKeys(t *testing.T) {
	base := "domain: preview.localhost\nauth:\n  keys: [{kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}]\n"
	tpl := "default_template: app\ntemplates:\n  app: {image: x}\n"
	c, err := Parse("c.yaml", []byte(base+tpl))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.LinkTTL.D() != time.Hour || c.Auth.MaxLinkTTL.D() != 24*time.Hour || c.Templates["app"].MaxKeepUp.D() != 4*time.Hour {
		t.Errorf("defaults: got %v %v %v, want 1h 24h 4h", c.Auth.LinkTTL, c.Auth.MaxLinkTTL, c.Templates["app"].MaxKeepUp)
	}
	_, err = Parse("c.yaml", []byte(base+"  link_ttl: 2h\n  max_link_ttl: 1h\n"+tpl))
	if err == nil || !strings.Contains(err.Error(), "c.yaml:4:13: auth.link_ttl: link_ttl 2h0m0s is longer than max_link_ttl 1h0m0s") {
		t.Errorf("link_ttl past max_link_ttl: got %v", err)
	}
}
