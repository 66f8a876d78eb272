package gateway

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/browsertest"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestBrowserIframeCookieWebSocket embeds a preview in a cross-site iframe
// with ?access_token=: the token is exchanged for a partitioned cookie, the
// page's fetch and WebSocket authenticate with it, and the app never sees a
// token.
func TestBrowserIframeCookieWebSocket(t *testing.T) {
	e := newDockerEnv(t, func(c *config.Config) { c.Domains = config.StringList{"localhost"} })
	ctx := browsertest.New(t, 90*time.Second)
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	id := dockertest.UniqueID("iframe")
	tok := testkit.Mint(t, e.cfg, id, 10*time.Minute)
	preview := fmt.Sprintf("http://sandbox-%s.localhost:%s", id, port)

	// The embedding product: another site (127.0.0.1 is not same-site with
	// *.localhost) that relays what the preview reports via postMessage.
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>app</title><pre id="result"></pre>
<script>addEventListener("message", e => { document.getElementById("result").textContent = e.data; });</script>
<iframe src="%s/page?x=1&access_token=%s"></iframe>`, preview, tok)
	}))
	defer outer.Close()

	browsertest.Navigate(t, ctx, outer.URL)
	raw, err := chromedp.Run(ctx, chromedp.Poll[string](`document.getElementById("result").textContent || null`,
		chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		t.Fatalf("waiting for the preview to report: %v", err)
	}
	var got struct {
		Location string `json:"location"`
		WS       string `json:"ws"`
		Echo     struct {
			Query   string      `json:"query"`
			Headers http.Header `json:"headers"`
		} `json:"echo"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("preview report %q: %v", raw, err)
	}
	if want := preview + "/page?x=1"; got.Location != want {
		t.Errorf("got iframe location %q, want %q (token removed from the address bar)", got.Location, want)
	}
	if got.WS != "echoed" {
		t.Errorf("got WebSocket %q, want echoed (cookie-authenticated upgrade)", got.WS)
	}
	all := fmt.Sprint(got.Echo.Headers) + got.Echo.Query
	for _, leak := range []string{tok, "previewgate_token", "access_token"} {
		if strings.Contains(all, leak) {
			t.Errorf("the app saw %q in %s", leak, all)
		}
	}
	if got.Echo.Headers.Get("Authorization") != "" {
		t.Errorf("the app saw an Authorization header")
	}

	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{preview + "/"}})
	if err != nil {
		t.Fatalf("get cookies: %v", err)
	}
	var found bool
	for _, c := range cookies.Cookies {
		if c.Name != "previewgate_token" {
			continue
		}
		found = true
		if !c.HTTPOnly || !c.Secure || c.SameSite != network.CookieSameSiteNone || c.PartitionKey == nil || c.Path != "/" {
			t.Errorf("got cookie httpOnly=%v secure=%v sameSite=%v partitioned=%v path=%q, want HttpOnly Secure None partitioned /",
				c.HTTPOnly, c.Secure, c.SameSite, c.PartitionKey != nil, c.Path)
		}
		if strings.HasPrefix(c.Domain, ".") {
			t.Errorf("got cookie domain %q, want host-only", c.Domain)
		}
	}
	if !found {
		t.Errorf("no previewgate_token cookie among %d cookies for the preview", len(cookies.Cookies))
	}
}
