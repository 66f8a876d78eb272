// Package upstream is previewgate's HTTP/1.1 client side towards
// sandboxes: a keep-alive connection pool for the direct path with its one
// exchange (Pool.Exchange: request head out, response in), a
// response-head parser and body reader that follow net/http's framing
// rules exactly (and refuse the few heads it accepts that are smuggling
// vectors), the relay of such a response to the client as ReverseProxy
// sends one (RelayHeader, Relay: end-to-end headers, trailers, streaming
// of a body of unknown length; TestRelay), and, for httputil.ReverseProxy,
// a RoundTripper with one http.Transport per container instance.
//
// Every byte a sandbox sends is hostile (#13). What it promises, each
// invariant tested with an upstream that breaks it (the gateway's
// hostile_test.go and hostile_docker_test.go, FuzzPoolReuse; this
// package's exchange_test.go):
//
//  1. A connection belongs to one container instance (a key such as
//     sandboxmgr.Endpoint.Instance: container ID and start time) and is
//     pooled under it, never under its address alone. A container that
//     inherits an address (Docker hands a dead container's IP to the next
//     one) never gets an old connection; on the ReverseProxy path each
//     instance has its own http.Transport. Within its instance a
//     connection serves only the address it was dialed to: a container
//     exposes several ports (#22), and a connection to one never carries
//     a request for another (net/http's Transport keys by address too).
//  2. CloseInstance closes every idle connection of an instance, and every
//     connection of it in use then is closed, not pooled, when its
//     exchange ends (each connection carries the instance's generation at
//     dial). Connections dialed after it are pooled again: a paused and
//     unpaused container keeps its instance.
//  3. A connection goes back to the pool only when its response ended
//     exactly at its framing and nothing more is buffered (an upstream may
//     send more than it was asked for: a second response would answer the
//     next user's request). This package alone decides it, as net/http's
//     Transport does: Pool.Exchange is the only way to take a connection,
//     and the Body.Close of the response it returns (Release calls it) the
//     only way to give one back. A body closed before its end, a read that
//     failed, Connection: close, a body delimited by EOF, a 101 or an
//     ended context close the connection (TestExchangeOwnsReuse). The
//     context is watched through its wire.Abort when it carries one (the
//     lean loop's: one hook per client connection), else by a hook of the
//     exchange's own; an ended context cuts a blocked read or write at
//     once either way (TestExchangeEndsWithContext).
//  4. An idle connection that has become readable (data or EOF) is closed
//     at Get, not reused. An app can still time extra bytes to arrive just
//     after that check; they are then read as the answer to the next
//     request to the same instance (bytes of its own making, which it
//     could send as that answer anyway), and invariant 3 ends the shift
//     with that exchange: nothing of its reaches another instance.
//  5. At most maxIdle connections per instance are kept, none longer than
//     idleTimeout; every write to a sandbox has a deadline (WriteTimeout);
//     no lock is held while a connection is dialed, read, written or
//     closed.
//  6. At most MaxInterim interim (1xx) heads are read before a final
//     response, on both paths (BoundHeads for ReverseProxy); a 101 is
//     returned to the caller, which refuses it unless it asked for an
//     upgrade.
//  7. Every response head, final or interim, is at most MaxResponseHead
//     (64 KiB) as sent, status line and blank line included, on every
//     path: ReadFinal for the direct path and the upgrade handshake
//     (internal/tunnel.Handshake reads with it), MaxResponseHeaderBytes on the
//     Transports it makes for ReverseProxy (HTTP/1.1 and HTTP/2 clients
//     alike: the sandbox side is HTTP/1.1). One byte more fails the
//     exchange with ErrHeadTooLarge (RoundTrip wraps net/http's refusal
//     in it), which the gateway answers 502 upstream_head_too_large. No
//     more than one head is held at a time. A head is parsed in place
//     from the connection's 16 KiB read buffer; a longer one is copied
//     out line by line, the only allocation it adds. On ReverseProxy,
//     bytes net/http read ahead past a 1xx head count against that head,
//     so the head after a 1xx may exceed the bound by up to that read-
//     ahead (the Transport's read buffer, 32 KiB).
//
// It must never decide policy (which requests take which path, statuses,
// retries beyond "may be sent again") nor know about sandboxes beyond an
// opaque instance key. The gateway's policy on top of these invariants
// (gateway/direct.go, proxy.go, upgrade.go), tested in the same files:
//
//   - Retry: a request that failed on a reused connection before any
//     response byte arrived is sent once more on a fresh connection, only
//     when it is a bodiless GET, HEAD or OPTIONS (direct path); a request
//     with a body (ReverseProxy) follows net/http's Transport rule, which
//     retries only requests it could not have sent. Never otherwise.
//   - 101: to a request without Upgrade it is a 502 and that connection is
//     closed, on the direct path and on ReverseProxy (its ModifyResponse
//     refuses it, so ReverseProxy closes the body, which is the
//     connection). An upgrade request (gateway/upgrade.go) takes a 101 as
//     its switch and anything else as an ordinary response.
//   - Other 1xx (103 Early Hints and the like): relayed to the client with
//     their end-to-end headers only, at most MaxInterim of them, then the
//     exchange fails (502): the direct path and the upgrade path as they
//     read them, ReverseProxy through InterimGuard
//     (ReverseProxy's own hook forwards an answer before BoundHeads
//     counts it).
package upstream
