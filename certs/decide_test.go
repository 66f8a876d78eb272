package certs

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSandboxHostDecider(t *testing.T) {
	t.Parallel()
	routes := func() []string { return []string{"docs-preview.example.com", "Status.Preview.Test"} }
	decide := SandboxHostDecider([]string{"preview.test", "Preview.Local."}, routes)
	tests := []struct {
		host string
		want bool
	}{
		{"sandbox-abc.preview.test", true},
		{"sandbox-abc.preview.test.", true},
		{"SANDBOX-ABC.PREVIEW.TEST", true}, // DNS names are case-insensitive
		{"sandbox-a-b-9.preview.local", true},
		{"sandbox-" + strings.Repeat("a", 55) + ".preview.test", true},
		{"sandbox-" + strings.Repeat("a", 56) + ".preview.test", false},
		{"8000-sandbox-abc.preview.test", true},
		{"65535-sandbox-abc.preview.test", true},
		{"8000-sandbox-" + strings.Repeat("a", 50) + ".preview.test", true},
		{"8000-sandbox-" + strings.Repeat("a", 51) + ".preview.test", false}, // label over 63
		{"0-sandbox-abc.preview.test", false},
		{"08000-sandbox-abc.preview.test", false},
		{"8000-abc.preview.test", false},
		{"docs-preview.example.com", true},
		{"status.preview.test", true},
		{"evil.example", false},
		{"sandbox-abc.evil.example", false},
		{"sandbox-abc.preview.test.evil.example", false},
		{"sandbox-Bad_.preview.test", false},
		{"sandbox-.preview.test", false},
		{"sandbox--abc.preview.test", false},
		{"sandbox-abc-.preview.test", false},
		{"sandbox-a.b.preview.test", false},
		{"x.sandbox-abc.preview.test", false},
		{"preview.test", false},
		{"abc.preview.test", false},
		{"", false},
		{"127.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := decide(tt.host); got != tt.want {
				t.Errorf("decide(%q): got %v, want %v", tt.host, got, tt.want)
			}
		})
	}
}

// approvedShape is the decision restated independently, for the fuzzer.
var approvedShape = regexp.MustCompile(`^sandbox-[a-z0-9]([a-z0-9-]{0,53}[a-z0-9])?\.(preview\.test|docs\.example)$`)

// FuzzSandboxHostDecider: SNI is untrusted input. The decision never panics
// and approves exactly the sandbox hosts of the configured domains and the
// configured route.
func FuzzSandboxHostDecider(f *testing.F) {
	for _, s := range []string{
		"sandbox-abc.preview.test", "evil.example", "sandbox-Bad_.preview.test",
		"sandbox-.docs.example", "route.example", "sandbox-a--b.docs.example.",
		"\x00", "sandbox-\xff.preview.test", "sandbox-\u212aabc.preview.test", strings.Repeat("a.", 200),
	} {
		f.Add(s)
	}
	decide := SandboxHostDecider([]string{"preview.test", "docs.example"}, func() []string { return []string{"route.example"} })
	f.Fuzz(func(t *testing.T, host string) {
		got := decide(host)
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		ascii := !strings.ContainsFunc(host, func(r rune) bool { return r >= utf8.RuneSelf })
		want := ascii && (h == "route.example" || approvedShape.MatchString(h))
		if got != want {
			t.Errorf("decide(%q): got %v, want %v", host, got, want)
		}
	})
}
