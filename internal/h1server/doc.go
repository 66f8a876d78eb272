// Package h1server serves HTTP for the preview listeners: a lean HTTP/1.1
// connection loop for the requests a Lean hook approves, in front of
// net/http, which serves everything else (HTTP/2, upgrades, bodies,
// anything unusual or malformed) on connections handed over with the bytes
// already read. It also owns what every connection is held to: the
// connection caps at accept, the head deadline from accept, the body rate,
// the write deadline, and the accept loop that survives running out of
// descriptors.
//
// Where it speaks HTTP/1.1 by hand, these invariants hold; each has a test
// with a peer that breaks it (h1_test.go, conns_test.go,
// accept_linux_test.go) and the loop is tested differentially against
// net/http (TestLeanMatchesNetHTTP, FuzzLeanParse):
//
//  1. The lean loop serves only a request it understands completely: GET,
//     HEAD or OPTIONS, HTTP/1.1, origin-form target, one valid Host, no
//     body or body framing, no upgrade, no Expect, no Connection options
//     but keep-alive and close, a head within 16 KiB and 100 lines, no bare
//     LF. Anything else goes to net/http unanswered, so net/http's checks
//     and error answers apply.
//  2. A response it writes is framed as net/http frames it (Content-Length
//     or chunked, HEAD and 1xx/204/304 without a body, trailers declared
//     before the head), and header names and values that could split a
//     response are refused or defused as net/http does.
//  3. A connection's first request head is due ReadHeaderTimeout after
//     accept, TLS handshake included, whoever serves it; a kept-alive
//     connection waits at most IdleTimeout for the next one.
//  4. Every write to a client has a deadline (limits.write_timeout): on the
//     socket, and on an HTTP/2 stream whose client withholds flow-control
//     window (the stream is reset; while Shutdown drains, within
//     drainWriteTimeout per 4 KiB); a request body slower than
//     limits.body_min_rate ends its request, and BodyTimedOut tells that
//     from a client that left.
//  5. No client holds more than limits.connections_per_ip connections, and
//     all clients together at most limits.max_connections; the accept loop
//     backs off on EMFILE and serves again when descriptors free up.
//  6. A panic in the handler ends that connection only, as net/http does.
//
// It never decides which requests are worth the lean loop (that is the
// Lean hook's, the gateway's policy) and never looks at what a request
// means beyond its framing.
package h1server
