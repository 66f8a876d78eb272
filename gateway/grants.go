package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/previewgate/previewgate/internal/tunnel"
	"github.com/previewgate/previewgate/links"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Open streams end with their grant. A request let in without a token (a
// share link, or a sandbox public by its settings, template or route) is
// checked when it begins; a stream it opens to the app (a WebSocket, an
// SSE or other long response: isLongLived) would otherwise outlive a
// revoke, the link's expiry, the sandbox's removal or a "public" taken
// back. Each such stream is registered here with its grant, and one sweep
// a second (grantSweep) asks every grant again from this replica's copy
// of the records and the manager's snapshot (no runtime or store call): a
// revoke made here ends its streams within a second, one made on another
// replica within that replica's re-check bound plus a second (records:
// this copy is reloaded every re-check), an expiry within a second. A
// WebSocket gets a close frame, 1008 (policy violation) with the reason;
// any other stream is cut (its request's context is cancelled), and one
// the app had not answered yet gets the answer a new request would
// (endedError).
//
// A request with a token registers nothing: its token was valid when the
// stream opened and nothing ends it but its sandbox going (BeforeStop).
// Neither does a plain response (not a stream), which ends by itself, nor
// the waiting page's status stream, which ends within the ready timeout
// and shows a visitor without a token the wake's phases only (waiting.go).
// A stream is registered once its sandbox's instance is known (after
// Ensure), so a wake's gap between instances never reads as a removal.
//
// The sweep is one goroutine, started by the first registration and
// ending when no stream is registered or the gateway closes (Close waits
// for it); a stream is registered from its start to its end, bounded by
// the connection and socket limits.

// grantSweep is how often open streams' grants are asked again.
const grantSweep = time.Second

// CloseGrantEnded is the WebSocket close code of a stream whose grant
// ended: 1008, policy violation.
const CloseGrantEnded = 1008

// grantKind is how a registered stream got in.
type grantKind uint8

const (
	grantLink   grantKind = iota + 1 // a share link: sandbox, link
	grantPublic                      // the sandbox or its route is public: host
)

// stream is one open stream and its grant.
type stream struct {
	kind    grantKind
	sandbox string
	h       sandboxmgr.Handle
	link    string // grantLink: the link's ID
	host    string // grantPublic: the request's host, resolved again by the current config
	cancel  context.CancelFunc
	// sock is the WebSocket's tunnel writer once the upgrade took the
	// stream (attach); nil for any other stream. Guarded by streams.mu.
	sock *tunnel.Writer
	// ended is why the sweep ended the stream (grantEnded); nil while it
	// holds. Guarded by streams.mu.
	ended error
}

// streams are the open streams admitted without a token.
type streams struct {
	g       *Gateway
	mu      sync.Mutex // guards set, running, closed and each stream's sock
	set     map[*stream]struct{}
	running bool // the sweep runs
	closed  bool // Close: no new sweep
	stop    chan struct{}
	wg      sync.WaitGroup // the sweep
}

func newStreams(g *Gateway) *streams {
	return &streams{g: g, set: map[*stream]struct{}{}, stop: make(chan struct{})}
}

// open registers r's stream if d let it in without a token, and returns
// the request to serve it with (its context ends with the grant), the
// stream (nil if none) and the release owed when it ends.
func (s *streams) open(r *http.Request, d *decision) (*http.Request, *stream, func()) {
	st := &stream{sandbox: d.rt.sandbox, h: d.h}
	switch d.by {
	case viaShareLink:
		st.kind, st.link = grantLink, d.link
	case publicNoToken:
		// A token holder's stream, which a "public" taken back must not end.
		if s.g.holdsToken(r, d) {
			return r, nil, func() {}
		}
		st.kind, st.host = grantPublic, r.Host
	default:
		return r, nil, func() {}
	}
	ctx, cancel := context.WithCancel(r.Context())
	st.cancel = cancel
	s.mu.Lock()
	s.set[st] = struct{}{}
	if !s.running && !s.closed {
		s.running = true
		s.wg.Add(1)
		go s.sweep()
	}
	s.mu.Unlock()
	return r.WithContext(ctx), st, func() {
		s.mu.Lock()
		delete(s.set, st)
		s.mu.Unlock()
		cancel()
	}
}

// count is how many streams are registered.
func (s *streams) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.set)
}

// attach makes w the way st is closed (its WebSocket's close frame); a
// nil st is none.
func (st *stream) attach(s *streams, w *tunnel.Writer) {
	if st == nil {
		return
	}
	s.mu.Lock()
	st.sock = w
	s.mu.Unlock()
}

// sweep asks every registered grant again each grantSweep, and ends the
// streams whose grant ended, until none is registered or Close.
func (s *streams) sweep() {
	defer s.wg.Done()
	tick := time.NewTicker(grantSweep)
	defer tick.Stop()
	var list []*stream
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		list = list[:0]
		s.mu.Lock()
		if len(s.set) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		for st := range s.set {
			list = append(list, st)
		}
		s.mu.Unlock()
		now := time.Now()
		for _, st := range list {
			if err := s.g.grantEnded(st, now); err != nil {
				s.end(st, err)
			}
		}
		clear(list)
	}
}

// end closes st because of why, without waiting for its client (a
// WebSocket's close frame is sent by its splice: tunnel invariant 4),
// and unregisters it.
func (s *streams) end(st *stream, why error) {
	s.mu.Lock()
	delete(s.set, st)
	w := st.sock
	st.ended = why
	s.mu.Unlock()
	if w == nil || !w.Hijacked() {
		// Not switched yet: the request's context first, so the proxy
		// sees a cancelled request and leaves the answer to endedError.
		st.cancel()
	}
	if w != nil {
		w.GoAway(CloseGrantEnded, closeReason(why))
	}
	st.cancel()
}

// endedError is the answer owed to st's request if its grant ended
// before anything was answered (the app had not sent its head, or an
// upgrade not switched yet): what a new request would be told. Nil
// while the grant holds.
func (s *streams) endedError(st *stream) *httpError {
	s.mu.Lock()
	why := st.ended
	s.mu.Unlock()
	switch {
	case why == nil:
		return nil
	case errors.Is(why, errNotPublic):
		return anonymousError(why)
	case errors.Is(why, errRemoved):
		return anonymousError(fmt.Errorf("%w: %w", runtime.ErrNotFound, why))
	}
	return linkError(why)
}

// close stops the sweep and waits for it; streams are the drain's to end.
func (s *streams) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// errRemoved: the manager no longer knows the stream's sandbox.
var errRemoved = errors.New("sandbox removed")

// closeReason is the WebSocket close frame's reason for why.
func closeReason(why error) string {
	switch {
	case errors.Is(why, links.ErrRevoked):
		return reasonRevoked
	case errors.Is(why, links.ErrExpired):
		return reasonExpired
	case errors.Is(why, links.ErrUnavailable):
		return reasonUnavailable
	case errors.Is(why, errRemoved):
		return reasonRemoved
	case errors.Is(why, errNotPublic):
		return reasonPrivate
	}
	return reasonLinkGone
}

// Why a stream's grant ended: the WebSocket close frame's reason.
const (
	reasonRevoked     = "share link revoked"
	reasonExpired     = "share link expired"
	reasonUnavailable = "share link cannot be checked now"
	reasonLinkGone    = "share link no longer valid"
	reasonRemoved     = "sandbox removed"
	reasonPrivate     = "sandbox no longer public"
)

// grantEnded says why st's grant no longer holds at now (a links error,
// errRemoved or errNotPublic), or nil if it does: by the manager's
// snapshot and this replica's copy of the records, as decide would answer
// a new request of st's (no runtime or store call).
func (g *Gateway) grantEnded(st *stream, now time.Time) error {
	snap := st.h.Snapshot()
	if !snap.Exists {
		return errRemoved
	}
	switch st.kind {
	case grantLink:
		return links.Holds(g.recs, st.sandbox, st.link, now)
	case grantPublic:
		t := g.table.Load()
		rt, herr := t.resolve(st.host)
		if herr != nil || rt.sandbox != st.sandbox {
			return errNotPublic
		}
		if pol := policyOf(t, rt, &snap); !pol.public {
			return errNotPublic
		}
	}
	return nil
}
