package certs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// hourly is an issuance budget: at most max orders in any hour (a sliding
// window, so no hour holds more, unlike a token bucket refilled at the
// same average).
type hourly struct {
	max   int
	now   func() time.Time
	mu    sync.Mutex  // guards times
	times []time.Time // orders in the last hour, oldest first
}

// take charges one order; false if max were made in the last hour.
func (h *hourly) take() bool {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	cut := 0
	for cut < len(h.times) && !h.times[cut].After(now.Add(-time.Hour)) {
		cut++
	}
	h.times = h.times[cut:]
	if len(h.times) >= h.max {
		return false
	}
	h.times = append(h.times, now)
	return true
}

// asker approves names by asking a URL, as Caddy's on_demand_tls ask:
// GET <url>?domain=<name>, 200 approves, anything else (or no answer
// within askTimeout) refuses.
type asker struct {
	url *url.URL
	cl  *http.Client
}

// askTimeout bounds an ask: the TLS handshake waits for it.
const askTimeout = 5 * time.Second

// errAskRefused: the ask hook did not approve the name.
var errAskRefused = errors.New("ask hook refused the name")

func newAsker(raw string) *asker {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil // config validation refused it already
	}
	return &asker{url: u, cl: &http.Client{Timeout: askTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (a *asker) approve(ctx context.Context, name string) error {
	u := *a.url
	q := u.Query()
	q.Set("domain", name)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := a.cl.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %q: %w", errAskRefused, name, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %q: status %d", errAskRefused, name, resp.StatusCode)
	}
	return nil
}
