package sandboxmgr

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Metadata (#23): pairs a backend sets at create to find a user's
// sandboxes again (GET /admin/sandboxes?metadata.KEY=VALUE). They are the
// instance's own labels (runtime.LabelMetaPrefix+key), immutable, so every
// replica lists the same. The charset is Kubernetes' label rules: a key is
// 1–40 of [a-z0-9._-], a value empty or 1–63 of [A-Za-z0-9._-], each
// starting and ending with a letter or digit; at most MaxMetadata pairs.

// MaxMetadata bounds the pairs of one sandbox.
const MaxMetadata = 16

// Bounds of a metadata key and value.
const (
	maxMetaKey   = 40 // runtime.LabelMetaPrefix (17) + 40 <= Kubernetes' 63
	maxMetaValue = 63
)

// ErrBadMetadata: metadata a runtime could not store as given.
var ErrBadMetadata = errors.New("bad metadata")

// CheckMetadata returns an error wrapping ErrBadMetadata that names the
// first offending pair, or nil.
func CheckMetadata(md map[string]string) error {
	if len(md) > MaxMetadata {
		return fmt.Errorf("%w: %d pairs, at most %d", ErrBadMetadata, len(md), MaxMetadata)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if !validMeta(k, maxMetaKey, false) {
			return fmt.Errorf("%w: key %q: want 1-%d of a-z 0-9 . _ -, starting and ending with a letter or digit", ErrBadMetadata, clip(k), maxMetaKey)
		}
		if v := md[k]; v != "" && !validMeta(v, maxMetaValue, true) {
			return fmt.Errorf("%w: value of %q: want at most %d of A-Z a-z 0-9 . _ -, starting and ending with a letter or digit", ErrBadMetadata, k, maxMetaValue)
		}
	}
	return nil
}

func validMeta(s string, maxLen int, upper bool) bool {
	if s == "" || len(s) > maxLen || !alnum(s[0], upper) || !alnum(s[len(s)-1], upper) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !alnum(c, upper) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte, upper bool) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || upper && 'A' <= c && c <= 'Z'
}

// clip shortens what an error quotes back.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// metadataOf returns the metadata in an instance's labels; nil if none.
func metadataOf(labels map[string]string) map[string]string {
	var md map[string]string
	for k, v := range labels {
		if key, ok := strings.CutPrefix(k, runtime.LabelMetaPrefix); ok && key != "" {
			if md == nil {
				md = make(map[string]string)
			}
			md[key] = v
		}
	}
	return md
}

// MatchMetadata reports whether md holds every pair of want.
func MatchMetadata(md, want map[string]string) bool { return runtime.HasLabels(md, want) }
