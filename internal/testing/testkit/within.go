package testkit

import (
	"testing"
	"time"
)

// Within fails the test if f does not return within d: a hang fails, it
// does not wedge the suite. what names f in the failure.
func Within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// WaitFor polls cond until it holds or a generous deadline passes. It
// bounds a hang, it does not measure speed. what names cond in the failure.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
