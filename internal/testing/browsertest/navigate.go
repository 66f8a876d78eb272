package browsertest

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Navigate loads url in the browser of ctx and runs then after it, again
// (at most three times) when the load ends in ERR_NETWORK_CHANGED:
// Chromium drops every connection, loopback ones too, when the host's
// interfaces change, which other tests' Docker networks and containers do
// at any moment. Any other error fails t. A load that lost only a page's
// subresources that way is not seen here (the gateway's stock dev-server
// test watches Network.loadingFailed for that).
func Navigate(t *testing.T, ctx context.Context, url string, then ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	steps := append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(url)}, then...)
	for tries := 0; ; tries++ {
		err := chromedp.Do(ctx, steps...)
		if err == nil {
			return
		}
		if tries < 3 && NetworkChanged(err) {
			t.Logf("navigate to %s: %v (the host's interfaces changed): loading it again", url, err)
			continue
		}
		t.Fatalf("navigate to %s: %v", url, err)
	}
}

// NetworkChanged reports whether err is Chromium's ERR_NETWORK_CHANGED.
func NetworkChanged(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ERR_NETWORK_CHANGED")
}
