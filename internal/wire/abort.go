package wire

import (
	"context"
	"net"
	"sync"
	"time"
)

// Abort carries a context's end to the one connection in use under it:
// the owner of a long-lived context (the lean loop's, one per client
// connection) pays for one context.AfterFunc for the context's life, and
// each use of the context (an upstream exchange) pays for a lock instead
// of registering and removing a hook of its own (#25: 2 µs per request).
//
// A user sets the connection it reads and writes (Set), and clears it
// when done (Clear). When the context ends, the connection set then gets
// a deadline in the past, so its blocked reads and writes fail at once,
// as a per-use context.AfterFunc would have made them; a later Set fails.
// Clear reports whether the context ended meanwhile, as AfterFunc's stop
// does, so the user can refuse to reuse a connection whose use was cut.
type Abort struct {
	done <-chan struct{} // the context's: AbortOf finds the Abort only for it

	mu   sync.Mutex // guards conn
	conn net.Conn
}

type abortKey struct{}

// WithAbort returns ctx carrying a new Abort bound to ctx's end. ctx
// must be cancellable (its Done not nil); the Abort lives as long as ctx.
func WithAbort(ctx context.Context) context.Context {
	a := &Abort{done: ctx.Done()}
	context.AfterFunc(ctx, a.fire)
	return context.WithValue(ctx, abortKey{}, a)
}

// AbortOf returns the Abort of ctx when ctx ends exactly when it does
// (ctx is the context WithAbort returned, or a value-only child of it);
// nil otherwise: a context with its own deadline or cancel needs its own
// hook.
func AbortOf(ctx context.Context) *Abort {
	a, _ := ctx.Value(abortKey{}).(*Abort)
	if a == nil || a.done != ctx.Done() {
		return nil
	}
	return a
}

// Set makes c the connection to abort when the context ends. It reports
// false, leaving nothing set, when the context has ended or another
// connection is set (the caller then watches the context itself).
func (a *Abort) Set(c net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil || a.ended() {
		return false
	}
	a.conn = c
	return true
}

// Clear unsets the connection Set set. It reports whether the context was
// still live, i.e. whether the connection's use was not cut (false: its
// deadline may have been moved; close it).
func (a *Abort) Clear() bool {
	a.mu.Lock()
	a.conn = nil
	a.mu.Unlock()
	return !a.ended()
}

// ended reports whether the context ended. Its Done is closed when
// cancel runs, before fire's goroutine starts: a Clear right after cancel
// reports it (as AfterFunc's stop does), and a Set after fire took the
// connection under mu fails.
func (a *Abort) ended() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// fire runs once, after the context ended.
func (a *Abort) fire() {
	a.mu.Lock()
	c := a.conn
	a.mu.Unlock()
	if c != nil {
		c.SetDeadline(time.Unix(1, 0))
	}
}
