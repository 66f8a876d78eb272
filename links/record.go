package links

import (
	"errors"
	"fmt"
	"time"
)

// Link is one share link as kept in its sandbox's record (package
// records): the digest of its secret, never the secret itself.
type Link struct {
	ID      string
	Digest  string // Digest of the token
	Port    int    // 0: the template's port
	Path    string // the path prefix it opens
	Created time.Time
	Expires time.Time
	Revoked time.Time // zero unless revoked; kept until Expires, so the page can say so
}

// MaxLinks bounds a sandbox's live (unexpired) links, so its record stays
// far under what a store keeps.
const MaxLinks = 32

// ErrTooManyLinks: a sandbox has MaxLinks live links already (or its
// record has no room for another).
var ErrTooManyLinks = fmt.Errorf("at most %d live share links per sandbox", MaxLinks)

// ErrNoLink: the sandbox has no link of that id.
var ErrNoLink = errors.New("no such link")

// Live reports whether l opens anything at now: neither expired nor revoked.
func (l Link) Live(now time.Time) bool { return l.Revoked.IsZero() && l.Expires.After(now) }

// Prune returns the links of ls that did not expire before now.
func Prune(ls []Link, now time.Time) []Link {
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		if l.Expires.After(now) {
			out = append(out, l)
		}
	}
	return out
}
