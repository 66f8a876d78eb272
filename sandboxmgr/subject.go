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
// subject's sandboxes first counts its running instances (by
// runtime.LabelSubject) in the runtime's list, which every replica shares.

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

// checkSubject fails with *SubjectLimitError when the runtime lists max or
// more running instances of this manager's scope made for subject.
func (m *Manager) checkSubject(ctx context.Context, subject string, max int) error {
	labels := m.scopeLabels()
	labels[runtime.LabelSubject] = SubjectKey(subject)
	list, err := m.rt.List(ctx, labels)
	if err != nil {
		return fmt.Errorf("count the subject's sandboxes: %w", err)
	}
	n := 0
	for _, c := range list {
		if m.owns(c) == nil && c.Labels[runtime.LabelSubject] == labels[runtime.LabelSubject] && c.State == runtime.StateRunning {
			n++
		}
	}
	if n >= max {
		return &SubjectLimitError{Limit: max, Running: n}
	}
	return nil
}
