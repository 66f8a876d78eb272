package config

import (
	"strings"
	"testing"
)

// TestSandboxFromHost is the one table for the sandbox-host rule that the
// gateway (routing), certs (on-demand TLS) and config (route hosts) share.
func TestSandboxFromHost(t *testing.T) {
	t.Parallel()
	domains := []string{"example.com", "preview.example.net"}
	tests := []struct {
		name, host    string
		wantNorm      bool // NormalizeHost accepts it
		id            string
		ok, malformed bool
	}{
		{"sandbox", "sandbox-abc.example.com", true, "abc", true, false},
		{"second domain", "sandbox-a-1.preview.example.net", true, "a-1", true, false},
		{"upper case", "SANDBOX-ABC.Example.COM", true, "abc", true, false},
		{"trailing dot", "sandbox-abc.example.com.", true, "abc", true, false},
		{"longest id", "sandbox-" + strings.Repeat("a", MaxIDLen) + ".example.com", true, strings.Repeat("a", MaxIDLen), true, false},
		{"id too long", "sandbox-" + strings.Repeat("a", MaxIDLen+1) + ".example.com", true, "", false, true},
		{"empty id", "sandbox-.example.com", true, "", false, true},
		{"underscore", "sandbox-a_b.example.com", true, "", false, true},
		{"trailing hyphen", "sandbox-a-.example.com", true, "", false, true},
		{"domain itself", "example.com", true, "", false, false},
		{"other label", "www.example.com", true, "", false, false},
		{"nested label", "sandbox-a.b.example.com", true, "", false, false},
		{"subdomain of a domain", "sandbox-a.preview.example.net.evil.com", true, "", false, false},
		{"foreign", "sandbox-a.example.org", true, "", false, false},
		{"suffix without dot", "sandbox-aexample.com", true, "", false, false},
		{"kelvin sign", "sandbox-\u212a.example.com", false, "", false, false},
		{"control byte", "sandbox-a.example.com\x00", false, "", false, false},
		{"space", "sandbox-a .example.com", false, "", false, false},
		{"DEL", "sandbox-a\x7f.example.com", false, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, ok := NormalizeHost(tt.host)
			if ok != tt.wantNorm {
				t.Fatalf("NormalizeHost(%q): got ok %v, want %v", tt.host, ok, tt.wantNorm)
			}
			if !ok {
				return
			}
			id, ok, malformed := SandboxFromHost(h, domains)
			if id != tt.id || ok != tt.ok || malformed != tt.malformed {
				t.Errorf("SandboxFromHost(%q): got (%q, %v, %v), want (%q, %v, %v)", h, id, ok, malformed, tt.id, tt.ok, tt.malformed)
			}
		})
	}
}

// TestSandboxPortFromHost: port hosts, <port>-sandbox-<id>.<domain> (#22).
func TestSandboxPortFromHost(t *testing.T) {
	t.Parallel()
	domains := []string{"example.com"}
	long := strings.Repeat("a", PortIDMax(8000)) // the longest id with a port-8000 host
	tests := []struct {
		name, host    string
		id            string
		port          int
		ok, malformed bool
	}{
		{"plain", "sandbox-abc.example.com", "abc", 0, true, false},
		{"port", "8000-sandbox-abc.example.com", "abc", 8000, true, false},
		{"port 1", "1-sandbox-abc.example.com", "abc", 1, true, false},
		{"port 65535", "65535-sandbox-abc.example.com", "abc", 65535, true, false},
		{"port 0", "0-sandbox-abc.example.com", "abc", -1, false, true},
		{"port 65536", "65536-sandbox-abc.example.com", "abc", -1, false, true},
		{"leading zero", "08000-sandbox-abc.example.com", "abc", -1, false, true},
		{"six digits", "100000-sandbox-abc.example.com", "", 0, false, false},
		{"digits, not a sandbox", "8000-abc.example.com", "", 0, false, false},
		{"digits only", "8000.example.com", "", 0, false, false},
		{"bad id", "8000-sandbox-a_b.example.com", "a_b", 8000, false, true},
		{"longest id for the label", "8000-sandbox-" + long + ".example.com", long, 8000, true, false},
		{"label over 63", "8000-sandbox-" + long + "a.example.com", long + "a", 8000, false, true},
		{"nested", "8000-sandbox-a.b.example.com", "", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, port, ok, malformed := SandboxPortFromHost(tt.host, domains)
			if id != tt.id || port != tt.port || ok != tt.ok || malformed != tt.malformed {
				t.Errorf("SandboxPortFromHost(%q): got (%q, %d, %v, %v), want (%q, %d, %v, %v)",
					tt.host, id, port, ok, malformed, tt.id, tt.port, tt.ok, tt.malformed)
			}
			if _, plainOK, _ := SandboxFromHost(tt.host, domains); plainOK && port != 0 {
				t.Errorf("SandboxFromHost(%q) took a port host for a plain one", tt.host)
			}
		})
	}
	if got := PortIDMax(8000); got != 50 {
		t.Errorf("PortIDMax(8000): got %d, want 50", got)
	}
}

func TestTSIGAlgorithm(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want, err string }{
		{"", "hmac-sha256", ""},
		{"hmac-sha512", "hmac-sha512", ""},
		{"HMAC-SHA1.", "hmac-sha1", ""},
		{"hmac-md5", "", "MD5 is broken"},
		{"HMAC-MD5.", "", "MD5 is broken"},
		{"hmac-sha3", "", "invalid tsig_alg"},
	} {
		got, err := TSIGAlgorithm(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("TSIGAlgorithm(%q): got %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestTSIGMD5Refused: config validation refuses hmac-md5 at its position,
// as certs.NewRFC2136 does at serve (#14: they disagreed).
func TestTSIGMD5Refused(t *testing.T) {
	t.Parallel()
	src := realBase + "tls:\n  mode: acme\n  acme:\n    strategy: wildcard\n    rfc2136: {server: \"ns1.example.com:53\", tsig_key: k, tsig_secret: c2VjcmV0, tsig_alg: hmac-md5}\n"
	_, err := parse("md5.yaml", []byte(src), env(nil))
	want := "md5.yaml:10:91: tls.acme.rfc2136.tsig_alg: tsig_alg hmac-md5 is not allowed: MD5 is broken (use hmac-sha256)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// NormalizeHost lower-cases only when an upper-case letter is there (#25:
// one scan instead of two); for every printable byte at every place it
// answers as strings.ToLower over the trimmed host did.
func TestNormalizeHostAsLower(t *testing.T) {
	for c := 0x21; c < 0x7f; c++ {
		for _, host := range []string{string(rune(c)), "Sandbox-A" + string(rune(c)) + ".Example.COM.", string(rune(c)) + "x.", "a.b" + string(rune(c))} {
			got, ok := NormalizeHost(host)
			if want := strings.ToLower(strings.TrimSuffix(host, ".")); !ok || got != want {
				t.Errorf("NormalizeHost(%q) = %q, %v; want %q, true", host, got, ok, want)
			}
		}
	}
}

// SandboxFromHost is SandboxPortFromHost for plain sandbox hosts: a port
// host is neither ok nor malformed here.
func SandboxFromHost(host string, domains []string) (id string, ok, malformed bool) {
	id, port, ok, malformed := SandboxPortFromHost(host, domains)
	if port != 0 {
		return "", false, false
	}
	return id, ok, malformed
}
