package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// largeConfig is testdata/config/full.yaml with n more templates and n
// more routes: about 60 KB, near the MaxNodes bound.
func largeConfig(b *testing.B, n int) []byte {
	b.Helper()
	full, err := os.ReadFile("../testdata/config/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var t, r strings.Builder
	for i := range n {
		fmt.Fprintf(&t, "  gen%d:\n    image: registry.example.com/app-%d:latest\n    port: 3000\n    memory: 512MiB\n    env: {NODE_ENV: development, N: \"%d\"}\n    ready: {path: /, timeout: 30s}\n", i, i, i)
		fmt.Fprintf(&r, "  - {host: gen%d.example.org, sandbox: gen-%d, template: gen%d}\n", i, i, i)
	}
	s := strings.Replace(string(full), "\ntemplates:\n", "\ntemplates:\n"+t.String(), 1)
	s = strings.Replace(s, "\nroutes:\n", "\nroutes:\n"+r.String(), 1)
	return []byte(s)
}

// BenchmarkParseLarge measures decoding and validating a large file (a
// reload's cost), not a bound: nothing asserts a time.
func BenchmarkParseLarge(b *testing.B) {
	data := largeConfig(b, 250) // about 7,000 keys and values of MaxNodes' 10,000
	lookup := env(map[string]string{"PREVIEWGATE_ADMIN_TOKEN": "0123456789abcdef0123", "PREVIEWGATE_JWT_SECRET": "0123456789abcdef0123456789abcdef", "TSIG_SECRET": "c2VjcmV0"})
	if _, err := parse("large.yaml", data, lookup); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parse("large.yaml", data, lookup); err != nil {
			b.Fatal(err)
		}
	}
}
