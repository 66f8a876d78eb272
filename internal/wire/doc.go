// Package wire holds the socket and HTTP/1.1 byte-level helpers that the
// lean server loop (internal/h1server) and the upstream client
// (internal/upstream) share: raw-syscall TCP connections with bounded
// writes, readability checks that consume nothing, token and header
// field rules, sinks that take a head's fields as a caller builds it
// (LineSink: HTTP/1.1 lines; HeaderSink: a header map), a context's end
// handed to the one connection in use under it (Abort: one hook per
// context, not per use), and the client address behind trusted proxies
// (ClientIPFrom: X-Forwarded-For and Forwarded walked from the right; which
// proxies are trusted is the caller's to say; FuzzClientIP).
//
// It promises net.Conn semantics (deadlines as timeouts, net.ErrClosed,
// concurrent Read and Write) and that no helper allocates on the common
// path (but for the value slices HeaderSink stores). It knows nothing of
// HTTP semantics beyond tokens and fields, and must never import the
// gateway or any policy.
package wire
