package gateway

import "time"

// Metrics is where the gateway reports what it did (*metrics.Metrics
// implements it). The methods are called on the request path: they must be
// cheap, safe for concurrent use, and must not block.
type Metrics interface {
	// Request counts one finished request on a preview host. template is
	// the template's name, "upstream" or "none"; took counts as proxy time
	// only when proxied (never for upgrades).
	Request(template string, status int, took time.Duration, proxied bool)
	// Rejected counts a request refused by a limit, by reason (ip, ...).
	Rejected(reason string)
	// AuthFailed counts a request refused by the access check, by reason.
	AuthFailed(reason string)
	// WebSocketOpened and WebSocketClosed bracket each proxied WebSocket.
	WebSocketOpened()
	WebSocketClosed()
}

// noMetrics records nothing: Options.Metrics left nil.
type noMetrics struct{}

func (noMetrics) Request(string, int, time.Duration, bool) {}
func (noMetrics) Rejected(string)                          {}
func (noMetrics) AuthFailed(string)                        {}
func (noMetrics) WebSocketOpened()                         {}
func (noMetrics) WebSocketClosed()                         {}
