package upstream

import "sync"

// BufferPool recycles copy buffers (Relay's, and request bodies'). It
// pools array pointers, so Put converts the slice back without
// allocating.
type BufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

// NewBufferPool returns a pool of copyBufferSize buffers.
func NewBufferPool() *BufferPool {
	return &BufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *BufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *BufferPool) Put(x []byte) {
	if cap(x) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(x[:copyBufferSize]))
	}
}
