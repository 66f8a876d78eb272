package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: malformed input never panics, every error carries a position,
// and a config that parses can be shown.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.yaml"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{base, base + "routes:\n  - {host: a.example.com, sandbox: a}\n",
		"a: &x [*x]\n", "<<: {domain: x}\n", "domain: ${X:-a.b}\n", "templates: {a: {<<: [{image: x}]}}\n",
		"domain: [\n", "\t", "---\n---\n", "!!binary x: y\n", "? [a]\n: b\n"} {
		f.Add([]byte(s))
	}
	lookup := env(fullEnv)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parse("fuzz.yaml", data, lookup)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got %T %v, want a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Line < 1 || e.Col < 1 || e.File != "fuzz.yaml" {
					t.Fatalf("got error without a position: %q", e.Error())
				}
			}
			return
		}
		if _, err := c.Redacted(); err != nil {
			t.Fatalf("Redacted: %v", err)
		}
	})
}
