package records

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/previewgate/previewgate/links"
)

// Settings are what a sandbox's backend set for it at run time (#23).
type Settings struct {
	// Public, if set, overrides the template's public: reachable without
	// a token (never "anyone may create").
	Public *bool
	// KeepUpUntil: the idle reaper leaves the running sandbox up until
	// then, traffic or not (bounded by its template's max_keep_up).
	KeepUpUntil time.Time
	// Links are its share links, expired ones pruned at each write.
	Links []links.Link
}

func (s Settings) empty() bool {
	return s.Public == nil && s.KeepUpUntil.IsZero() && len(s.Links) == 0
}

// LiveLinks counts the links of s that open something at now.
func (s Settings) LiveLinks(now time.Time) int {
	n := 0
	for _, l := range s.Links {
		if l.Live(now) {
			n++
		}
	}
	return n
}

// mark is a DELETE's removal mark in a sandbox's record (marks.go).
type mark struct {
	ID string    // random: one per DELETE
	At time.Time // the writer's clock, for the mark's life
}

// version is the stored format written ("v"); a record without one
// decodes the same way.
const version = 1

// stored is a record's bytes: its own type, so the stored JSON never
// follows a change of a domain type by accident.
type stored struct {
	V           int          `json:"v"`
	Public      *bool        `json:"public,omitempty"`
	KeepUpUntil time.Time    `json:"keep_up_until,omitzero"`
	Links       []storedLink `json:"links,omitempty"`
	Removed     *storedMark  `json:"removed,omitempty"`
}

type storedLink struct {
	ID      string    `json:"id"`
	Digest  string    `json:"digest"`
	Port    int       `json:"port,omitempty"`
	Path    string    `json:"path"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Revoked time.Time `json:"revoked,omitzero"`
}

type storedMark struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// encode is s and m (nil: none) as a record's bytes.
func encode(s Settings, m *mark) ([]byte, error) {
	st := stored{V: version, Public: s.Public, KeepUpUntil: s.KeepUpUntil}
	for _, l := range s.Links {
		st.Links = append(st.Links, storedLink(l))
	}
	if m != nil {
		st.Removed = &storedMark{ID: m.ID, At: m.At}
	}
	return json.Marshal(st)
}

// decode reads a record's bytes, of any version written so far.
func decode(data []byte) (Settings, *mark, error) {
	var st stored
	if err := json.Unmarshal(data, &st); err != nil {
		return Settings{}, nil, fmt.Errorf("decode record: %w", err)
	}
	s := Settings{Public: st.Public, KeepUpUntil: st.KeepUpUntil}
	for _, l := range st.Links {
		s.Links = append(s.Links, links.Link(l))
	}
	var m *mark
	if st.Removed != nil {
		m = &mark{ID: st.Removed.ID, At: st.Removed.At}
	}
	return s, m, nil
}

// addLink appends l to s if the record keeps room for every change that
// adds no link (revoking each, public, keep-up): a link minted into the
// last bytes could never be revoked. links.ErrTooManyLinks if not.
func addLink(s *Settings, l links.Link) error {
	if len(s.Links) >= links.MaxLinks {
		return links.ErrTooManyLinks
	}
	worst, no := *s, false
	worst.Public = &no
	worst.KeepUpUntil = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60)))
	worst.Links = append(slices.Clone(s.Links), l)
	for i := range worst.Links {
		worst.Links[i].Revoked = worst.KeepUpUntil
	}
	// And a live removal mark, which a change keeps (marks.go).
	if b, err := encode(worst, &mark{ID: newMarkID(), At: worst.KeepUpUntil}); err != nil || len(b) > MaxRecord {
		return fmt.Errorf("%w: the sandbox's record (%d bytes) is full", links.ErrTooManyLinks, MaxRecord)
	}
	s.Links = append(s.Links, l)
	return nil
}
