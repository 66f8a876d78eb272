package upstream

import (
	"net/http/httputil"
	"testing"
)

var _ httputil.BufferPool = (*BufferPool)(nil)

// TestBufferPoolNoAlloc: a buffer goes back and out of the pool without an
// allocation, and a buffer of another size is not taken in.
func TestBufferPoolNoAlloc(t *testing.T) {
	p := NewBufferPool()
	p.Put(p.Get())
	if n := testing.AllocsPerRun(100, func() { p.Put(p.Get()) }); n != 0 {
		t.Errorf("got %v allocations per Get and Put, want 0", n)
	}
	p.Put(make([]byte, 10))
	if b := p.Get(); len(b) != copyBufferSize {
		t.Errorf("got a buffer of %d bytes, want %d", len(b), copyBufferSize)
	}
}
