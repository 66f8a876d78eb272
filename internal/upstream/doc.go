// Package upstream is previewgate's HTTP/1.1 client towards sandboxes and
// fixed upstreams, the one path of every request but an upgrade (HTTP/1.1
// and HTTP/2 clients alike): a keep-alive pool with its one exchange
// (Pool.Exchange: head and body out, answer in), a response reader that
// follows net/http's framing exactly and refuses the heads it accepts
// that are smuggling vectors, and the relay of an answer to the client as
// httputil.ReverseProxy sends one (RelayHeader, Relay; TestRelay). An
// upgrade's handshake reads its answer with ReadFinal (internal/tunnel).
// net/http's Transport is the reference for what a client must not trust
// (the gateway's TestDirectMatchesReverseProxy compares the two).
//
// Every byte a sandbox sends is hostile (#13). What it promises, each
// invariant tested with an upstream that breaks it (the gateway's
// hostile_test.go, hostile_body_test.go and hostile_docker_test.go,
// FuzzPoolReuse; this package's exchange_test.go and reqbody_test.go):
//
//  1. A connection belongs to one container instance (a key such as
//     sandboxmgr.Endpoint.Instance: container ID and start time; a fixed
//     upstream's scheme and host) and is pooled under it, never under its
//     address alone. A container that inherits an address (Docker hands a
//     dead container's IP to the next one) never gets an old connection.
//     Within its instance a connection serves only the address it was
//     dialed to: a container exposes several ports (#22), and a
//     connection to one never carries a request for another (net/http's
//     Transport keys by address too).
//  2. CloseInstance closes every idle connection of an instance, and every
//     connection of it in use then is closed, not pooled, when its
//     exchange ends (each connection carries the instance's generation at
//     dial). Connections dialed after it are pooled again: a paused and
//     unpaused container keeps its instance.
//  3. A connection goes back to the pool only when its request body went
//     out whole and its response ended exactly at its framing with nothing
//     more buffered (an upstream may send more than it was asked for: a
//     second response would answer the next user's request). This
//     package alone decides it, as net/http's Transport does:
//     Pool.Exchange is the only way to take a connection, and the
//     Body.Close of the response it returns (Release calls it) the only way
//     to give one back. A body closed before its end, a read that failed,
//     Connection: close, a body delimited by EOF, a 101, a request body cut
//     short or an ended context close the connection
//     (TestExchangeOwnsReuse, TestBodyReuse). The context is watched
//     through its wire.Abort when it carries one (the lean loop's: one hook
//     per client connection), else by a hook of the exchange's own; an
//     ended context cuts a blocked read or write at once either way
//     (TestExchangeEndsWithContext).
//  4. An idle connection that has become readable (data or EOF) is closed
//     at Get, not reused. An app can still time extra bytes to arrive just
//     after that check; they are then read as the answer to the next
//     request to the same instance (bytes of its own making, which it
//     could send as that answer anyway), and invariant 3 ends the shift
//     with that exchange: nothing of its reaches another instance.
//  5. At most 256 connections per instance are kept idle, none longer than
//     90 s; every write to a sandbox has a deadline (WriteTimeout: a body
//     the app does not take fails then, TestBodyWriteBound); no lock is
//     held while a connection is dialed, read, written or closed.
//  6. At most MaxInterim interim (1xx) heads are read before a final
//     response; each is handed to the caller (the gateway forwards them); a
//     101 is returned to the caller, which refuses it unless it asked for
//     an upgrade.
//  7. Every response head, final or interim, is at most MaxResponseHead
//     (64 KiB) as sent, status line and blank line included: ReadFinal
//     reads every head, on the exchange and the upgrade handshake
//     (internal/tunnel.Handshake reads with it). One byte more fails the
//     exchange with ErrHeadTooLarge, which the gateway answers 502
//     upstream_head_too_large. No more than one head is held at a time. A
//     head is parsed in place from the connection's 16 KiB read buffer; a
//     longer one is copied out line by line, the only allocation it adds.
//  8. A request body goes out beside the answer (reqbody.go), on a
//     goroutine the exchange owns and waits for before it returns or its
//     response is closed: the client's body is never read after its
//     exchange. Its first bytes (or its end) are read before the head is
//     written, unless it waits for 100 Continue: a body that fails at once
//     (a malformed first chunk size) sends the app nothing, never a head
//     it would take for an empty request. An answer that comes first
//     reaches the client at once; a failed read of the client's body ends
//     the exchange with that error first, wrapped in ErrRequestBody (too
//     slow, too large, malformed, gone), so the gateway answers 408, 413,
//     400 or 499, never the 502 the cut connection would suggest. A body is
//     framed by the exchange (Content-Length, or chunked with the client's
//     trailers), never by the client's fields, and an Expect:
//     100-continue body waits for the app's 100 Continue (at most
//     ExpectContinueTimeout).
//  9. Nothing is sent twice unless the caller asks for it: ErrUnanswered
//     marks only a bodiless request that failed on a reused connection
//     before any byte of answer; a request with a body never carries it
//     (its bytes may have gone out). A failed dial sent nothing.
//  10. A new connection carries nothing until its Request's Confirm (when
//     set) said its peer is the instance it was dialed for, asked after
//     the connection was made: an address says only where an instance
//     was. Any error closes it unused; nothing was sent. A reused
//     connection is not asked again (invariant 1 binds it to its
//     instance), so a warm request makes no call (TestConfirmNewOnly).
//
// It must never decide policy (which requests go where, statuses, retries
// beyond "may be sent again") nor know about sandboxes beyond an opaque
// instance key. The gateway's policy on top of these invariants (retries,
// a 101 nobody asked for, relaying 1xx) is documented and tested where it
// lives: gateway/direct.go's forward, upgrade.go.
//
// One path, measured: BenchmarkLeanChain and BenchmarkHandlerChain found
// no case where a second client (httputil.ReverseProxy on net/http's
// Transport, which this replaced for bodies and fixed upstreams) was
// cheaper.
package upstream
