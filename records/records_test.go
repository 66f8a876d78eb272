package records

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/links"
)

// TestUpdateConcurrent: writers racing on one record (two replicas'
// caches on one store) lose nothing: the version guards each write.
func TestUpdateConcurrent(t *testing.T) {
	st := newMem()
	a, b := New(st, Options{}), New(st, Options{})
	var wg sync.WaitGroup
	for i := range 16 {
		r := []*Records{a, b}[i%2]
		wg.Go(func() {
			_, err := r.Update(t.Context(), "x", func(s *Settings) error {
				s.Links = append(s.Links, links.Link{ID: fmt.Sprintf("l%d", i), Expires: time.Now().Add(time.Hour)})
				return nil
			})
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if s, err := b.Load(t.Context(), "x"); err != nil || len(s.Links) != 16 {
		t.Fatalf("after 16 concurrent writes: %d links (%v), want 16", len(s.Links), err)
	}
}

// TestSettingsFreshness: a copy read from the store within staleAfter
// re-check periods grants; an older one does not, until a reload of that
// record (Refresh) or of all (Reload) succeeds. Without periodic
// re-checks every copy is fresh; with no store there is nothing to grant
// and nothing stale.
func TestSettingsFreshness(t *testing.T) {
	st := newMem()
	r := New(st, Options{RecheckEvery: time.Second})
	now := time.Now()
	r.now = func() time.Time { return now }
	if _, fresh := r.Settings("x"); fresh {
		t.Error("before any read: fresh, want stale")
	}
	if _, err := r.Reload(t.Context(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, fresh := r.Settings("x"); !fresh {
		t.Error("right after a reload: stale, want fresh")
	}
	now = now.Add(staleAfter*time.Second + time.Millisecond)
	if _, fresh := r.Settings("x"); fresh {
		t.Error("a reload older than the bound: fresh, want stale")
	}
	<-r.refresh(t.Context(), "x")
	if _, fresh := r.Settings("x"); !fresh {
		t.Error("after a refresh of the record: stale, want fresh")
	}
	if _, fresh := r.Settings("y"); fresh {
		t.Error("another record, not refreshed: fresh, want stale")
	}
	if _, fresh := New(st, Options{}).Settings("x"); !fresh {
		t.Error("without periodic re-checks: stale, want fresh")
	}
	var none *Records
	if s, fresh := none.Settings("x"); !fresh || s.Public != nil {
		t.Errorf("no records: %+v %v, want empty and fresh", s, fresh)
	}
	if _, err := none.Update(context.Background(), "x", func(*Settings) error { return nil }); err != ErrNoRecords {
		t.Errorf("a change without records: %v, want ErrNoRecords", err)
	}
}

// TestAddLinkRoom: a link is added only while the record keeps room to
// revoke every link, set public and a keep-up, and keep a removal mark.
func TestAddLinkRoom(t *testing.T) {
	var s Settings
	for i := range links.MaxLinks {
		l := links.Link{ID: fmt.Sprintf("l%011d", i), Digest: fmt.Sprintf("%064d", i), Path: "/" + fmt.Sprintf("%0511d", i), Port: 65535,
			Created: time.Now(), Expires: time.Now().Add(time.Hour)}
		if err := addLink(&s, l); err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
	}
	if err := addLink(&s, links.Link{ID: "one-more"}); err == nil {
		t.Errorf("link %d: got nil, want ErrTooManyLinks", links.MaxLinks+1)
	}
	worst := s
	no := false
	worst.Public, worst.KeepUpUntil = &no, time.Now()
	for i := range worst.Links {
		worst.Links[i].Revoked = time.Now()
	}
	if b, err := encode(worst, &mark{ID: newMarkID(), At: time.Now()}); err != nil || len(b) > MaxRecord {
		t.Errorf("a full record, every link revoked: %d bytes (%v), want at most %d", len(b), err, MaxRecord)
	}
}

// slowList is a store whose full list (a re-check's) is read when it is
// asked for and answered only when released: a record read on demand
// meanwhile is newer than the list.
type slowList struct {
	memStore
	listed, release chan struct{}
}

func (s slowList) ListRecords(ctx context.Context, labels map[string]string) (map[string]Record, error) {
	out, err := s.memStore.ListRecords(ctx, labels)
	if _, one := labels[LabelRecord]; !one {
		close(s.listed)
		<-s.release
	}
	return out, err
}

// TestReloadKeepsNewerReads: a link minted on another replica while a
// re-check's list is in flight, and read here on demand, stays when the
// older list lands (it was dropped until the next re-check: a link just
// granted here read as gone).
func TestReloadKeepsNewerReads(t *testing.T) {
	mem := newMem()
	st := slowList{memStore: mem, listed: make(chan struct{}), release: make(chan struct{})}
	here, there := New(st, Options{RecheckEvery: time.Hour}), New(mem, Options{RecheckEvery: time.Hour})
	done := make(chan error, 1)
	go func() {
		_, err := here.Reload(context.Background(), time.Now())
		done <- err
	}()
	<-st.listed
	l := links.Link{ID: "l1", Expires: time.Now().Add(time.Hour)}
	if err := there.AddLink(t.Context(), "x", l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond) // the on-demand read begins after the list did
	<-here.refresh(t.Context(), "x")
	if ls, _ := here.Links("x"); len(ls) != 1 {
		t.Fatalf("on-demand read: %d links, want 1", len(ls))
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ls, _ := here.Links("x"); len(ls) != 1 {
		t.Errorf("after the older list landed: %d links, want the one read on demand", len(ls))
	}
}

// countedStore counts list calls; each waits until hold is closed.
type countedStore struct {
	memStore
	lists atomic.Int32
	hold  chan struct{}
}

func (s *countedStore) ListRecords(ctx context.Context, labels map[string]string) (map[string]Record, error) {
	s.lists.Add(1)
	<-s.hold
	return s.memStore.ListRecords(ctx, labels)
}

// TestRefreshNeverWaits: Refresh returns at once while its read of the
// store is blocked; a burst of them shares that one read; one asked
// within a second of the last read is made at its slot, a second after,
// in the background. Fake time: synctest.
func TestRefreshNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countedStore{memStore: newMem(), hold: make(chan struct{})}
		r := New(st, Options{})
		for range 100 {
			r.Refresh(t.Context(), "x") // returns though the read is blocked
		}
		synctest.Wait()
		if n := st.lists.Load(); n != 1 {
			t.Fatalf("a burst of refreshes while one read is blocked: %d reads, want 1", n)
		}
		close(st.hold)
		synctest.Wait()
		t0 := time.Now()
		r.Refresh(t.Context(), "x")
		if time.Since(t0) != 0 {
			t.Errorf("a refresh within the second waited %v, want none", time.Since(t0))
		}
		synctest.Wait() // the second read waits for its slot
		if n := st.lists.Load(); n != 1 {
			t.Fatalf("within a second of the last read: %d reads, want still 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := st.lists.Load(); n != 2 {
			t.Errorf("a second later: %d reads, want 2", n)
		}
	})
}
