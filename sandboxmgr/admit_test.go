package sandboxmgr

import (
	"sync"
	"testing"
)

// TestAdmissions: a count sees the wakes admitted and not ended, and those
// that ended after it began (its list may have missed their instances);
// not those that ended before, nor another subject's.
func TestAdmissions(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var a admissions
	count := func(subject string, mark uint64) map[string]bool {
		ids := map[string]bool{}
		a.countLocked(subject, mark, ids)
		return ids
	}

	mu.Lock()
	releaseA := a.addLocked("a", "alice", &mu)
	a.addLocked("b", "bob", &mu)
	mark := a.beginLocked() // a count lists now
	mu.Unlock()
	releaseA() // a's wake ends while the list is taken
	mu.Lock()
	if got := count("alice", mark); !got["a"] || len(got) != 1 {
		t.Errorf("count begun before a ended: got %v, want a", got)
	}
	later := a.beginLocked()
	if got := count("alice", later); len(got) != 0 {
		t.Errorf("count begun after a ended: got %v, want none (its list has a)", got)
	}
	a.endLocked(mark)
	a.endLocked(later)
	if _, ok := a.byID["a"]; ok {
		t.Error("a kept after every count that could miss it ended")
	}
	if got := count("bob", a.beginLocked()); !got["b"] {
		t.Errorf("bob's count: got %v, want b, admitted and not ended", got)
	}
	mu.Unlock()
	releaseA() // again: harmless
}
