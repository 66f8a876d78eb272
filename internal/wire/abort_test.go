package wire

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestAbortOf: only a context that ends exactly when the Abort's does
// finds it; a child with its own cancel or deadline must watch itself.
func TestAbortOf(t *testing.T) {
	base, cancel := context.WithCancel(t.Context())
	defer cancel()
	ctx := WithAbort(base)
	if AbortOf(ctx) == nil {
		t.Fatal("the Abort's own context does not find it")
	}
	type key struct{}
	if AbortOf(context.WithValue(ctx, key{}, 1)) == nil {
		t.Error("a value-only child does not find it")
	}
	child, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	if AbortOf(child) != nil {
		t.Error("a child with its own deadline finds it")
	}
	if AbortOf(base) != nil || AbortOf(context.Background()) != nil {
		t.Error("a context without it finds one")
	}
}

// TestAbortFires: the connection set when the context ends gets a past
// deadline (its blocked read fails), Clear then reports the end, and no
// connection can be set afterwards.
func TestAbortFires(t *testing.T) {
	base, cancel := context.WithCancel(t.Context())
	a := AbortOf(WithAbort(base))
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	if !a.Set(c1) {
		t.Fatal("Set on a live context failed")
	}
	if a.Set(c2) {
		t.Fatal("a second connection was set while one is")
	}
	read := make(chan error, 1)
	go func() {
		_, err := c1.Read(make([]byte, 1))
		read <- err
	}()
	cancel()
	if err := <-read; err == nil {
		t.Fatal("a read on the set connection survived the context's end")
	}
	if a.Clear() {
		t.Error("Clear after the end reported a live context")
	}
	if a.Set(c2) {
		t.Error("Set after the end succeeded")
	}
}
