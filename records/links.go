package records

import (
	"context"
	"slices"
	"time"

	"github.com/previewgate/previewgate/links"
)

// The records as package links reads and keeps share links.
var (
	_ links.Records = (*Records)(nil)
	_ links.Keeper  = (*Records)(nil)
)

// Links are id's links as cached, and whether that copy is fresh
// (Settings).
func (r *Records) Links(id string) ([]links.Link, bool) {
	s, fresh := r.Settings(id)
	return s.Links, fresh
}

// RefreshLinks starts a reload of id's links (Refresh) and returns at
// once.
func (r *Records) RefreshLinks(ctx context.Context, id string) {
	r.Refresh(ctx, id)
}

// LoadLinks reads id's links from the store.
func (r *Records) LoadLinks(ctx context.Context, id string) ([]links.Link, error) {
	s, err := r.Load(ctx, id)
	return s.Links, err
}

// AddLink keeps l among id's links if the record has room for it
// (addLink); links.ErrTooManyLinks if not.
func (r *Records) AddLink(ctx context.Context, id string, l links.Link) error {
	_, err := r.Update(ctx, id, func(s *Settings) error { return addLink(s, l) })
	return err
}

// RevokeLink marks id's link lid revoked at at, unless it was already;
// links.ErrNoLink if id has no link lid.
func (r *Records) RevokeLink(ctx context.Context, id, lid string, at time.Time) error {
	_, err := r.Update(ctx, id, func(s *Settings) error {
		i := slices.IndexFunc(s.Links, func(l links.Link) bool { return l.ID == lid })
		if i < 0 {
			return links.ErrNoLink
		}
		if s.Links[i].Revoked.IsZero() {
			s.Links[i].Revoked = at // Update's copy (pruned), not the cache's
		}
		return nil
	})
	return err
}
