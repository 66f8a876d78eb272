package links

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"
)

// Keeper keeps sandboxes' links in their records (package records
// implements it). Each call reads the record fresh from the store; the
// caller checked that the sandbox exists.
type Keeper interface {
	// AddLink keeps l among id's links; ErrTooManyLinks if there is no
	// room.
	AddLink(ctx context.Context, id string, l Link) error
	// RevokeLink marks id's link lid revoked at at (it is kept until it
	// expires, so its page can say so); ErrNoLink if id has no link lid.
	RevokeLink(ctx context.Context, id, lid string, at time.Time) error
	// LoadLinks reads id's links.
	LoadLinks(ctx context.Context, id string) ([]Link, error)
}

// ErrPath: a link's path could never open what it names.
var ErrPath = errors.New("path: want an absolute path such as /docs, without query or dot segments (. or ..)")

// maxPath bounds a link's path: MaxLinks of them fit a record.
const maxPath = 512

// Mint makes a share link to sandbox id's port (0: its template's) under
// path ("": "/") from now until exp, keeps it with k, and returns it and
// its token, which is shown once and never kept. ErrPath if no request
// could be opened by path: a query, or a dot segment, which Check never
// lets a link open and every browser removes before it asks.
func Mint(ctx context.Context, k Keeper, id string, port int, path string, now, exp time.Time) (Link, string, error) {
	if path == "" {
		path = "/"
	}
	u, err := url.Parse(path)
	if err != nil || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || u.RawQuery != "" ||
		u.Fragment != "" || u.Path != path || len(path) > maxPath || !RequestWithin(u, path) {
		return Link{}, "", ErrPath
	}
	lid, tok, digest, err := newToken(exp)
	if err != nil {
		return Link{}, "", err
	}
	l := Link{ID: lid, Digest: digest, Port: port, Path: path, Created: now, Expires: exp}
	if err := k.AddLink(ctx, id, l); err != nil {
		return Link{}, "", err
	}
	return l, tok, nil
}

// List returns id's links that have not expired at now, oldest first.
func List(ctx context.Context, k Keeper, id string, now time.Time) ([]Link, error) {
	ls, err := k.LoadLinks(ctx, id)
	if err != nil {
		return nil, err
	}
	return Prune(ls, now), nil
}

// Revoke ends id's link lid at now; ErrNoLink if it has none.
func Revoke(ctx context.Context, k Keeper, id, lid string, now time.Time) error {
	return k.RevokeLink(ctx, id, lid, now)
}
