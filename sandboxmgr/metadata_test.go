package sandboxmgr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

func TestCheckMetadata(t *testing.T) {
	many := map[string]string{}
	for i := range MaxMetadata + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	cases := []struct {
		name string
		md   map[string]string
		ok   bool
	}{
		{"none", nil, true},
		{"plain", map[string]string{"user": "u-42", "project.id": "Abc_9"}, true},
		{"empty value", map[string]string{"flag": ""}, true},
		{"upper key", map[string]string{"User": "x"}, false},
		{"key with slash", map[string]string{"a/b": "x"}, false},
		{"key edge", map[string]string{"-a": "x"}, false},
		{"long key", map[string]string{strings.Repeat("a", 41): "x"}, false},
		{"long value", map[string]string{"a": strings.Repeat("v", 64)}, false},
		{"value space", map[string]string{"a": "b c"}, false},
		{"value newline", map[string]string{"a": "b\nc"}, false},
		{"value edge", map[string]string{"a": "b."}, false},
		{"too many", many, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckMetadata(c.md)
			if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrBadMetadata) {
				t.Errorf("got %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestMetadataOfAndMatch(t *testing.T) {
	md := metadataOf(map[string]string{runtime.LabelMetaPrefix + "user": "u1", runtime.LabelMetaPrefix + "env": "dev", runtime.LabelTemplate: "t"})
	if len(md) != 2 || md["user"] != "u1" {
		t.Fatalf("got %v", md)
	}
	if !MatchMetadata(md, map[string]string{"user": "u1", "env": "dev"}) || MatchMetadata(md, map[string]string{"user": "u2"}) ||
		MatchMetadata(md, map[string]string{"other": ""}) {
		t.Error("match is wrong")
	}
}

// FuzzCheckMetadata: whatever is accepted is storable as a Kubernetes
// label (name runtime.LabelMetaPrefix+key, and value) and round-trips.
func FuzzCheckMetadata(f *testing.F) {
	f.Add("user", "u-1")
	f.Add("a.b", "")
	f.Add("A", "x y")
	f.Fuzz(func(t *testing.T, k, v string) {
		md := map[string]string{k: v}
		if CheckMetadata(md) != nil {
			return
		}
		name := runtime.LabelMetaPrefix + k
		if len(name) > 63 || len(v) > 63 {
			t.Fatalf("accepted %q=%q beyond label bounds", k, v)
		}
		for _, s := range []string{name, v} {
			for i := range len(s) {
				if c := s[i]; !alnum(c, true) && !strings.ContainsRune("._-", rune(c)) {
					t.Fatalf("accepted byte %q in %q", c, s)
				}
			}
		}
		if back := metadataOf(map[string]string{name: v}); back[k] != v {
			t.Fatalf("round trip: got %v", back)
		}
	})
}
