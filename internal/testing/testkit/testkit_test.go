package testkit

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
)

// TestServeTCPEndsHandlers: when the test ends, a handler blocked reading
// its connection is released (ServeTCP closes the connection; the client
// keeps its end open) and has returned, however long it takes to.
func TestServeTCPEndsHandlers(t *testing.T) {
	var ended atomic.Bool
	accepted := make(chan struct{})
	var client net.Conn
	t.Run("inner", func(t *testing.T) {
		addr := ServeTCP(t, func(c net.Conn) {
			close(accepted)
			io.Copy(io.Discard, c)
			time.Sleep(50 * time.Millisecond) // a slow handler is waited for too
			ended.Store(true)
		})
		var err error
		if client, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		<-accepted
	})
	defer client.Close()
	if !ended.Load() {
		t.Fatal("the handler was still running after its test ended")
	}
}

// TestConfigFileAndMint: ConfigFile loads as written, and Mint's token is
// accepted for its sandbox only.
func TestConfigFileAndMint(t *testing.T) {
	_, cfg := WriteConfig(t, ConfigFile(map[string]string{"docs.example.test": "http://127.0.0.1:1"}))
	if len(cfg.Domains) != 1 || cfg.Domains[0] != Domain || cfg.AdminToken != AdminToken || cfg.Auth.Keys[0].Secret != Secret {
		t.Fatalf("got domains %v, admin token %q, key %+v; want the testkit constants", cfg.Domains, cfg.AdminToken, cfg.Auth.Keys[0])
	}
	if len(cfg.Routes) != 1 || cfg.Routes[0].Host != "docs.example.test" {
		t.Fatalf("got routes %+v, want docs.example.test", cfg.Routes)
	}
	v, err := auth.NewVerifier(cfg.Auth, false)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+Mint(t, cfg, "abc", time.Minute))
	if _, err := v.Check(r, "abc"); err != nil {
		t.Errorf("token for abc, checked for abc: %v", err)
	}
	if _, err := v.Check(r, "def"); err == nil {
		t.Error("token for abc accepted for def")
	}
}

// TestScrape reads series and values and skips comments.
func TestScrape(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\nb 0.5\n\n")
	})
	got := Scrape(t, h)
	if len(got) != 2 || got[`a_total{x="1"}`] != 3 || got["b"] != 0.5 {
		t.Fatalf("got %v, want a_total{x=\"1\"} 3 and b 0.5", got)
	}
}
