package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/previewgate/previewgate/config"
	"golang.org/x/time/rate"
)

// JWKS timings. A token with an unknown kid triggers a refresh at most
// once per Verifier.jwksEvery; other requests with unknown kids in between
// fail at once instead of queueing behind the limiter (jwksWaitMax bounds
// the wait for the limiter and the fetch together).
const (
	jwksRefreshInterval = time.Hour
	jwksHTTPTimeout     = 5 * time.Second
	jwksWaitMax         = 5 * time.Second
)

// startJWKS fetches url once (a failure is logged, not fatal: the set is
// fetched again hourly and on unknown kid) and starts the refresh
// goroutine, which Close stops. keyfunc enforces the JWK's own "alg" when
// it has one; the parser accepts only asymmetric algorithms.
func (v *Verifier) startJWKS(url string) error {
	ctx, cancel := context.WithCancel(context.Background())
	log := v.log
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{url}, keyfunc.Override{
		HTTPTimeout:       jwksHTTPTimeout,
		RateLimitWaitMax:  jwksWaitMax,
		RefreshInterval:   jwksRefreshInterval,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(v.jwksEvery), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				log.WarnContext(ctx, "jwks refresh failed", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		cancel()
		return fmt.Errorf("jwks %s: %w", url, err)
	}
	v.jwks = kf
	v.jwksParser = v.parserFor(config.JWKSAlgorithms...)
	v.cancel = cancel
	return nil
}
