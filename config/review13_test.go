package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestReviewManyKeysBomb: a config within MaxSize and MaxDepth whose cost is
// superlinear in the number of keys of one mapping: ~45,000 env keys
// (under 1 MiB) take tens of seconds to validate, on the CLI and on
// POST /admin/config/validate alike. #13 asks that bounded input be
// refused or decided "in well under a second".
func TestReviewManyKeysBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: preview.localhost\ndefault_template: app\ntemplates:\n  app:\n    image: x\n    env:\n")
	for i := 0; b.Len() < MaxSize-64; i++ {
		fmt.Fprintf(&b, "      K%d: v\n", i)
	}
	data := []byte(b.String())
	_, err := Parse("keys.yaml", data)
	if err == nil || !strings.Contains(err.Error(), "keys.yaml:") || !strings.Contains(err.Error(), "more than 10000 keys and values") {
		t.Fatalf("a %d-byte config with one mapping of %d keys: got %.200v, want it refused with a position before the parser runs",
			len(data), strings.Count(b.String(), "\n"), err)
	}
}
