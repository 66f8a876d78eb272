package sandboxmgr

import "sync"

// admissions are the wakes this manager admitted past a per-subject cap
// (subject.go) and has not seen end, by sandbox id, so that a count made
// from the runtime's list also sees the starts in flight: N parallel first
// requests of one subject are admitted one after the other, against one
// another, never all against the same empty list.
//
// A count lists first and decides under m.mu, so a wake that ended while
// the list was taken may be in neither: its instance started after the
// list, its admission is gone. An ended admission is therefore kept (done)
// until every count that began before it ended has decided. Counts are by
// sandbox id, so an instance both listed and admitted counts once.
//
// Every method's caller holds Manager.mu for writing.
type admissions struct {
	clock    uint64               // ticks at every count's beginning and every end
	byID     map[string]*admitted // one per sandbox: wakes of a sandbox are serial
	counting map[uint64]bool      // counts in flight, by the clock at their beginning
}

type admitted struct {
	subject string // SubjectKey
	ended   uint64 // clock when its wake ended; 0 while it runs
}

// beginLocked starts a count and returns its mark, for endLocked and
// countLocked.
func (a *admissions) beginLocked() uint64 {
	if a.counting == nil {
		a.counting = make(map[uint64]bool)
	}
	a.clock++
	a.counting[a.clock] = true
	return a.clock
}

// endLocked ends the count begun at mark and forgets ended admissions no
// count in flight can miss.
func (a *admissions) endLocked(mark uint64) {
	delete(a.counting, mark)
	oldest := a.clock + 1
	for m := range a.counting {
		oldest = min(oldest, m)
	}
	for id, ad := range a.byID {
		if ad.ended != 0 && ad.ended < oldest {
			delete(a.byID, id)
		}
	}
}

// countLocked adds to ids the sandboxes of subject admitted and not ended,
// or ended after the count begun at mark began (its list may miss them).
func (a *admissions) countLocked(subject string, mark uint64, ids map[string]bool) {
	for id, ad := range a.byID {
		if ad.subject == subject && (ad.ended == 0 || ad.ended > mark) {
			ids[id] = true
		}
	}
}

// addLocked admits id's wake for subject; the returned func ends it (once).
func (a *admissions) addLocked(id, subject string, mu sync.Locker) (release func()) {
	if a.byID == nil {
		a.byID = make(map[string]*admitted)
	}
	ad := &admitted{subject: subject}
	a.byID[id] = ad
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if a.byID[id] != ad {
				return
			}
			a.clock++
			ad.ended = a.clock
			if len(a.counting) == 0 {
				delete(a.byID, id) // no count can miss it
			}
		})
	}
}
