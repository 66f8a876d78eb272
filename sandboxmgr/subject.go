package sandboxmgr

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Per-subject running caps (#24, 9): a wake that would run one more of a
// subject's sandboxes first counts the subject's running instances (by
// runtime.LabelSubject) in the runtime's list, which every replica shares,
// together with the wakes of the subject this manager admitted and has not
// seen end (admissions), so parallel first requests cannot all pass one
// count. Another replica's admitted wakes are seen only once their
// instances run: across replicas a subject may run up to the cap on each.

// ErrSubjectLimit: the subject already runs as many sandboxes as it may.
var ErrSubjectLimit = errors.New("subject runs its maximum of sandboxes")

// SubjectLimitError is ErrSubjectLimit with the numbers.
type SubjectLimitError struct {
	Limit, Running int
}

func (e *SubjectLimitError) Error() string {
	return fmt.Sprintf("%v (%d running, at most %d)", ErrSubjectLimit, e.Running, e.Limit)
}

func (e *SubjectLimitError) Unwrap() error { return ErrSubjectLimit }

// SubjectKey is runtime.LabelSubject's value for subject: a digest, valid
// on every runtime and not the subject in plain text.
func SubjectKey(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return "u" + hex.EncodeToString(sum[:])[:32]
}

// admitSubject admits the wake of sandbox id to run one more of subject's
// sandboxes, or fails with *SubjectLimitError when max others run or are
// being started: those the runtime lists running, and those this manager
// admitted (admissions). The returned release ends the admission; call it
// when the wake ends, whatever its outcome.
func (m *Manager) admitSubject(ctx context.Context, id, subject string, max int) (release func(), err error) {
	key := SubjectKey(subject)
	labels := m.scopeLabels()
	labels[runtime.LabelSubject] = key
	m.mu.Lock()
	began := m.admits.beginLocked()
	m.mu.Unlock()
	list, err := m.rt.List(ctx, labels)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.admits.endLocked(began)
	if err != nil {
		return nil, fmt.Errorf("count the subject's sandboxes: %w", err)
	}
	others := make(map[string]bool)
	for _, c := range list {
		if m.owns(c) != nil || c.Labels[runtime.LabelSubject] != key || c.State != runtime.StateRunning {
			continue
		}
		name, ok := m.idFromName(c.Name, c.Labels[runtime.LabelPool])
		if !ok {
			name = "container " + c.ID // counted, bound to no id
		}
		others[name] = true
	}
	m.admits.countLocked(key, began, others)
	delete(others, id) // the wake asking; not running, or running already
	if len(others) >= max {
		return nil, &SubjectLimitError{Limit: max, Running: len(others)}
	}
	return m.admits.addLocked(id, key, &m.mu), nil
}
