package h1server

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// An HTTP/2 client can stop taking a stream's bytes without stopping to read
// the connection: it withholds WINDOW_UPDATE (or announces an initial window
// of 0), so the stream's writes wait for flow control, not for the socket.
// The socket's own write deadline (wire.RawConn) never fires, and net/http's
// HTTP/2 server waits forever: each such stream keeps its handler, and with
// it a connection to a sandbox, for as long as the client likes (as many
// as the gateway's exchange caps admit: connections_per_ip per client,
// max_connections in all).
//
// The server holds HTTP/2 streams to limits.write_timeout as the socket
// holds HTTP/1.1 (#13): a Write or Flush by the handler that waits longer
// than the timeout for each 4 KiB it carries resets the stream
// (RST_STREAM, INTERNAL_ERROR), which fails the write, so the handler ends
// and releases what it holds. Per 4 KiB, because a socket's deadline is
// re-armed by every send that makes progress, while a stream's Write of
// 32 KiB (the proxy's copy buffer) may rightly take many window updates on
// a slow link shared by many streams: a client must take 4 KiB per
// timeout (136 bytes a second at the default 30s), as net/http's handler
// buffer is 4 KiB. A stream idle between writes (an SSE stream, a long
// poll) is never reset.
//
// Not covered: the bytes net/http itself flushes after the handler returned
// (the last 4 KiB at most, and END_STREAM). A client that withholds window
// for them keeps that stream's slot, a goroutine and its buffer, but no
// sandbox connection, until it closes the connection: bounded per
// connection by MaxConcurrentStreams, as streams a client holds open any
// other way are. Flushing them inside the handler, under the watch, costs
// every response a second DATA frame: about 8 % of h2load's 1 KiB rate
// (BENCHMARKS.md), so it is not done.
//
// The watch is the server's sweep (every watchAfter/2), not a timer per
// stream: a stream costs one small allocation, two atomic stores per write
// and one registry insert; the sweep deletes finished streams in bulk. A
// stall is acted on within watchAfter/2 of its due time.
//
// The watch goes on until Shutdown returns, and a drain tightens it
// (#24): net/http's Shutdown waits for every open stream, and a stalled
// one would otherwise hold it until its deadline (the default write
// timeout outlasts the process's shutdown grace). From Shutdown on, a
// write may take drainWriteTimeout per 4 KiB; writes in progress keep the
// same share of what they had left.

// streamWriter is the ResponseWriter of one HTTP/2 stream under watch.
type streamWriter struct {
	http.ResponseWriter
	set *streamSet

	due   atomic.Int64 // UnixNano by which the write in progress must end; 0: none
	reset atomic.Bool  // the stream was reset
	added bool         // in the registry (the handler's goroutine only)

	mu   sync.Mutex  // held while the sweep resets the stream
	done atomic.Bool // the handler returned (set under mu): not ours to reset
}

// watchStreams wraps h so that HTTP/2 streams are under the sweep's watch.
func (s *Server) watchStreams(h http.Handler) http.Handler {
	if s.writeTimeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			h.ServeHTTP(w, r)
			return
		}
		sw := &streamWriter{ResponseWriter: w, set: &s.streams}
		defer sw.finish()
		h.ServeHTTP(sw, r)
	})
}

// finish ends the watch when the handler returns; the sweep forgets sw.
func (sw *streamWriter) finish() {
	sw.mu.Lock()
	sw.done.Store(true)
	sw.mu.Unlock()
}

func (sw *streamWriter) Write(p []byte) (int, error) {
	sw.begin(len(p))
	n, err := sw.ResponseWriter.Write(p)
	sw.due.Store(0)
	return n, err
}

// FlushError is what http.ResponseController.Flush calls (ReverseProxy
// flushes that way).
func (sw *streamWriter) FlushError() error {
	sw.begin(0) // a flush sends at most the 4 KiB buffered
	err := http.NewResponseController(sw.ResponseWriter).Flush()
	sw.due.Store(0)
	return err
}

func (sw *streamWriter) Flush() { sw.FlushError() }

// Unwrap lets http.ResponseController reach the stream's other controls.
func (sw *streamWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// watchUnit is how many bytes a write may take write_timeout to send.
const watchUnit = 4 << 10

// begin marks a write of n bytes in progress; the first puts sw under
// watch.
func (sw *streamWriter) begin(n int) {
	if !sw.added {
		// Registered before its first due is set, so a drain that does
		// not find the due (streamSet.drain) finds the flag.
		sw.added = true
		sw.set.add(sw)
	}
	units := time.Duration(max(1, (n+watchUnit-1)/watchUnit))
	now := time.Now()
	ss := sw.set
	sw.due.Store(now.Add(units * ss.timeout).UnixNano())
	if ss.draining.Load() {
		// Draining, or the drain began meanwhile and may have passed this
		// due by.
		sw.due.Store(now.Add(units * ss.drainTimeout).UnixNano())
	}
}

// resetStream resets sw's stream if its write is still overdue at now
// and its handler has not returned. Not I/O: a deadline in the past queues
// RST_STREAM and fails the blocked write.
func (sw *streamWriter) resetStream(now time.Time) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if due := sw.due.Load(); due != 0 && now.UnixNano() >= due && !sw.done.Load() && !sw.reset.Swap(true) {
		http.NewResponseController(sw.ResponseWriter).SetWriteDeadline(time.Unix(1, 0))
	}
}

// drainWriteTimeout bounds each 4 KiB of an HTTP/2 stream's writes once
// the server drains (or write_timeout, if shorter). A client that takes
// less than 4 KiB a second while the server shuts down is taken for
// stalled.
const drainWriteTimeout = time.Second

// streamSet is the registry of watched streams, sharded so that streams
// on both cores rarely meet on a lock.
type streamSet struct {
	timeout      time.Duration // limits.write_timeout
	drainTimeout time.Duration // min(timeout, drainWriteTimeout)
	draining     atomic.Bool   // Shutdown began: writes get drainTimeout
	n            atomic.Uint32
	shards       [8]struct {
		mu sync.Mutex
		m  map[*streamWriter]struct{}
		_  [40]byte // one shard per cache line
	}
}

func (ss *streamSet) add(sw *streamWriter) {
	sh := &ss.shards[ss.n.Add(1)%uint32(len(ss.shards))]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[*streamWriter]struct{})
	}
	sh.m[sw] = struct{}{}
	sh.mu.Unlock()
}

// drain holds watched writes to drainTimeout per 4 KiB from now on: a
// write in progress keeps the same share of the time it had left. Writes
// that begin later take drainTimeout (streamWriter.begin); one that began
// as the flag was set finds it on its second look, or is found here.
func (ss *streamSet) drain(now time.Time) {
	if ss.draining.Swap(true) || ss.drainTimeout >= ss.timeout {
		return
	}
	share := float64(ss.drainTimeout) / float64(ss.timeout)
	for i := range ss.shards {
		sh := &ss.shards[i]
		sh.mu.Lock()
		for sw := range sh.m {
			if due := sw.due.Load(); due > now.UnixNano() {
				// Lost to the writer: that write ended, or began under
				// the drain's bound.
				sw.due.CompareAndSwap(due, now.UnixNano()+int64(float64(due-now.UnixNano())*share))
			}
		}
		sh.mu.Unlock()
	}
}

// sweep resets streams whose write is overdue and forgets those whose
// handler returned.
func (ss *streamSet) sweep(now time.Time) {
	var stalled []*streamWriter
	for i := range ss.shards {
		sh := &ss.shards[i]
		sh.mu.Lock()
		for sw := range sh.m {
			if sw.done.Load() {
				delete(sh.m, sw)
				continue
			}
			if due := sw.due.Load(); due != 0 && now.UnixNano() >= due && !sw.reset.Load() {
				stalled = append(stalled, sw)
			}
		}
		sh.mu.Unlock()
	}
	for _, sw := range stalled {
		sw.resetStream(now) // not under a shard's lock: it queues a frame
	}
}
