package gateway

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestLeanLeavesLinkInURL: a share link in the URL is what the user
// opened, so it is checked (and exchanged, or refused) even next to a
// valid token (access). The lean loop, which checks tokens only, must
// leave such a request to net/http: it served the app instead, past a
// refused link, so the two loops answered the same request differently.
func TestLeanLeavesLinkInURL(t *testing.T) {
	t.Parallel()
	addr, _ := rawApp(t, func(w io.Writer, _, _ int, r *http.Request) bool {
		io.WriteString(w, okResponse("app"))
		return true
	})
	eps := &endpoints{}
	eps.set("abc", addr, "i1")
	got := map[bool]int{}
	for _, lean := range []bool{true, false} {
		cfg := testConfig()
		g, err := New(cfg, fakes(eps), Options{NetHTTPOnly: !lean}, testkit.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		srv := serve(t, NewServer(cfg, g, testkit.Logger(t)))
		// A made-up link (its record does not exist): refused.
		link := "l0123456789ab." + "zzzzzz" + ".secret"
		req := abcRequest("GET", srv.URL+"/?"+auth.LinkParam+"="+link, nil, testkit.Mint(t, cfg, "abc", time.Minute))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got[lean] = resp.StatusCode
	}
	if got[true] != got[false] || got[false] == http.StatusOK {
		t.Errorf("a link in the URL next to a valid token: lean loop %d, net/http %d; want the same refusal", got[true], got[false])
	}
}
