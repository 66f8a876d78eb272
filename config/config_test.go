package config

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/config")

const fixtures = "../testdata/config"

// fullEnv holds the variables full.yaml refers to.
var fullEnv = map[string]string{
	"PREVIEWGATE_ADMIN_TOKEN": "admin-0123456789abcdef",
	"PREVIEWGATE_JWT_SECRET":  "jwt-secret-0123456789abcdef012345",
	"TSIG_SECRET":             "dHNpZy1zZWNyZXQ=",
}

func TestLoadFull(t *testing.T) {
	for k, v := range fullEnv {
		t.Setenv(k, v)
	}
	path := filepath.Join(fixtures, "full.yaml")
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): got %v, want no error", path, err)
	}
	if err := Validate(path); err != nil {
		t.Errorf("Validate: got %v, want nil", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"domains", []string(c.Domains), []string{"preview.example.com", "preview.example.net"}},
		{"admin token", string(c.AdminToken), fullEnv["PREVIEWGATE_ADMIN_TOKEN"]},
		{"jwt secret", string(c.Auth.Keys[0].Secret), fullEnv["PREVIEWGATE_JWT_SECRET"]},
		{"tsig secret", string(c.TLS.ACME.RFC2136.TSIGSecret), fullEnv["TSIG_SECRET"]},
		{"memory", c.Templates["nextjs"].Memory, ByteSize(1 << 30)},
		{"docs memory", c.Templates["docs"].Memory, ByteSize(512 << 20)},
		{"idle timeout", c.Templates["nextjs"].IdleTimeout.D(), 15 * time.Minute},
		{"docs idle default", c.Templates["docs"].IdleTimeout.D(), 15 * time.Minute},
		{"docs name", c.Templates["docs"].Name, "docs"},
		{"env", c.Templates["nextjs"].Env["PORT"], "3000"},
		{"route upstream", c.Routes[1].Upstream, URL("http://10.0.0.5:8080")},
		{"bare IP proxy", c.TrustedProxies[1], netip.MustParsePrefix("192.168.1.7/32")},
		{"per ip", *c.Limits.PerIP, Rate{Rate: 50, Burst: 100}},
		{"template rates", *c.Templates["nextjs"].Limits.PerSubject, Rate{Rate: 50, Burst: 100}},
		{"header bytes", c.Limits.MaxHeaderBytes, ByteSize(64 << 10)},
		{"path", c.Path, path},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s: got %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestRedactedGolden(t *testing.T) {
	for k, v := range fullEnv {
		t.Setenv(k, v)
	}
	c, err := Load(filepath.Join(fixtures, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fullEnv {
		if bytes.Contains(got, []byte(v)) {
			t.Errorf("redacted output contains the value of %s", k)
		}
	}
	golden := filepath.Join(fixtures, "full.redacted.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./config -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("redacted config differs from %s (run go test ./config -update)\ngot:\n%s", golden, got)
	}
}

// TestRedactedRoundTrip: the effective config parses back (through
// ParseUpdate, which keeps the running env values) to the same effective
// config.
func TestRedactedRoundTrip(t *testing.T) {
	t.Parallel()
	src := "domain: preview.localhost\nauth: {jwks_url: \"https://a.example.com/jwks\"}\n" +
		"templates:\n  web: {image: nginx, memory: 300MB, env: {A: b}}\ntrusted_proxies: [\"::1\"]\n"
	c, err := parse("a.yaml", []byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := parseUpdate("a.yaml", out, c, env(nil))
	if err != nil {
		t.Fatalf("re-parse of redacted output: %v\n%s", err, out)
	}
	if got := c2.Templates["web"].Env["A"]; got != "b" {
		t.Errorf("got env A %q, want b", got)
	}
	out2, err := c2.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, out2) {
		t.Errorf("round trip changed the config:\n%s\nthen:\n%s", out, out2)
	}
}

func TestEnvExpansion(t *testing.T) {
	t.Parallel()
	lookup := env(map[string]string{"DIR": "/srv", "EMPTY": "", "PORT": "8080", "PUB": "true",
		"INJECT": "x\nadmin_token: injected-0123456789"})
	tests := []struct {
		name, value, want string
	}{
		{"plain", "${DIR}/data", "/srv/data"},
		{"twice", "${DIR}${DIR}", "/srv/srv"},
		{"default used", "${NOPE:-/tmp}", "/tmp"},
		{"default for empty", "${EMPTY:-/tmp}", "/tmp"},
		{"empty without default", "a${EMPTY}b", "ab"},
		{"escaped", "$${DIR}", "${DIR}"},
		{"lone dollar", "pa$$word$", "pa$$word$"},
		{"yaml in value stays a value", "${INJECT}", "x\nadmin_token: injected-0123456789"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := base + "data_dir: '" + tt.value + "'\n"
			c, err := parse("e.yaml", []byte(src), lookup)
			if err != nil {
				t.Fatal(err)
			}
			if c.DataDir != tt.want {
				t.Errorf("got %q, want %q", c.DataDir, tt.want)
			}
			if c.AdminToken != "" {
				t.Errorf("got admin_token set by expansion, want none")
			}
		})
	}
	t.Run("typed values", func(t *testing.T) {
		t.Parallel()
		c, err := parse("e.yaml", []byte(base+"  t2: {image: x, port: \"${PORT}\", public: \"${PUB}\"}\n"), lookup)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Templates["t2"]; got.Port != 8080 || !got.Public {
			t.Errorf("got port %d public %v, want 8080 true", got.Port, got.Public)
		}
	})
	t.Run("keys are not expanded", func(t *testing.T) {
		t.Parallel()
		_, err := parse("e.yaml", []byte(base+"${DIR}: 1\n"), lookup)
		if err == nil || !strings.Contains(err.Error(), `e.yaml:6:1: unknown key "${DIR}"`) {
			t.Errorf("got %v, want unknown key at 6:1", err)
		}
	})
}

func TestAliasesAndMerge(t *testing.T) {
	t.Parallel()
	src := base + "  a: &common\n    image: x\n    memory: 2GiB\n  b:\n    <<: *common\n    memory: 3GiB\n"
	c, err := parse("m.yaml", []byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Templates["b"]; b.Image != "x" || b.Memory != 3<<30 {
		t.Errorf("got image %q memory %v, want x 3GiB", b.Image, b.Memory)
	}
}

func TestAliasBomb(t *testing.T) {
	t.Parallel()
	ten := func(name string) string { return strings.TrimSuffix(strings.Repeat("*"+name+", ", 10), ", ") }
	var b strings.Builder
	b.WriteString("x:\n  m0: &m0 {k0: v, k1: v, k2: v, k3: v, k4: v, k5: v, k6: v, k7: v, k8: v, k9: v}\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "  m%d: &m%d {<<: [%s]}\n", i, i, ten(fmt.Sprintf("m%d", i-1)))
	}
	b.WriteString(base + "  t2:\n    image: x\n    env: {<<: [" + ten("m8") + "]}\n")
	_, err := parse("bomb.yaml", []byte(b.String()), env(nil))
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Errorf("got %v, want document too large", err)
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{"a", true},
		{"abc-123", true},
		{"a--b", true},
		{strings.Repeat("a", 55), true},
		{strings.Repeat("a", 56), false},
		{"", false},
		{"-a", false},
		{"a-", false},
		{"A", false},
		{"a_b", false},
		{"a.b", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q): got %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"100", 100, true},
		{"512MB", 512_000_000, true},
		{"1GiB", 1 << 30, true},
		{"1.5GiB", 3 << 29, true},
		{"64 KiB", 64 << 10, true},
		{"2g", 2 << 30, true},
		{"10Gi", 10 << 30, true},
		{"512Mi", 512 << 20, true},
		{"", 0, false},
		{"GiB", 0, false},
		{"-1", 0, false},
		{"1 GiBs", 0, false},
		{"99999999999TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseByteSize(%q): got %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	s := Secret("top-secret")
	for _, got := range []string{s.String(), s.GoString()} {
		if strings.Contains(got, "top-secret") {
			t.Errorf("got %q, want it redacted", got)
		}
	}
}

func TestRestartNeeded(t *testing.T) {
	t.Parallel()
	old, err := parse("a.yaml", []byte(base), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	nw, err := parse("a.yaml", []byte(base+"listen: {http: \":8081\"}\ndata_dir: /x\nlog: {level: debug}\nlimits: {max_running: 3}\nruntime: {kind: kubernetes}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := RestartNeeded(old, nw)
	want := []string{"listen.http", "data_dir", "runtime", "log.level"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	keepRestartOnly(old, nw)
	if nw.Listen.HTTP != old.Listen.HTTP || nw.Limits.MaxRunning != 3 {
		t.Errorf("got listen %q max_running %d, want the old listen kept and the new limit", nw.Listen.HTTP, nw.Limits.MaxRunning)
	}
	// Each restart-only key names a setting of the file (setting panics
	// on a key that names none).
	for _, k := range append(slices.Clone(restartOnly), domainSetting) {
		setting(nw, k)
	}
}

// TestRestartNeededDomains: where certificates are made for the start
// domains (acme wildcard, self-signed), a domain change is reported and the
// running domains kept, while the rest of the reload applies; elsewhere the
// new domains are live at once.
func TestRestartNeededDomains(t *testing.T) {
	t.Parallel()
	const wildcard = "tls:\n  mode: acme\n  acme:\n    strategy: wildcard\n" +
		"    rfc2136: {server: \"127.0.0.1:53\", tsig_key: k., tsig_secret: c2VjcmV0}\n"
	tests := []struct {
		name        string
		tls         string // appended to both files
		newDomains  string // the new file's domain line
		wantRestart []string
	}{
		{"wildcard, domain added", wildcard, "domain: [preview.example.com, preview.example.org]", []string{"domain"}},
		{"wildcard, domain replaced", wildcard, "domain: preview.example.org", []string{"domain"}},
		{"wildcard, same domain", wildcard, "domain: preview.example.com", nil},
		{"self-signed, domain added", "tls: {mode: self-signed}\n", "domain: [preview.example.com, preview.example.org]", []string{"domain"}},
		{"on-demand, domain added", "tls: {mode: acme}\n", "domain: [preview.example.com, preview.example.org]", nil},
		{"files, domain added", "tls: {mode: files, cert_file: c.pem, key_file: k.pem}\n", "domain: [preview.example.com, preview.example.org]", nil},
		{"off behind a proxy, domain added", "trusted_proxies: [10.0.0.0/8]\n", "domain: [preview.example.com, preview.example.org]", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old, err := parse("a.yaml", []byte(realBase+tc.tls), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			rest := strings.TrimPrefix(realBase, "domain: preview.example.com\n")
			nw, err := parse("a.yaml", []byte(tc.newDomains+"\n"+rest+tc.tls+"limits: {max_running: 3}\n"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(nw.Domains)
			got := RestartNeeded(old, nw)
			if !slices.Equal(got, tc.wantRestart) {
				t.Errorf("got restart %v, want %v", got, tc.wantRestart)
			}
			keepRestartOnly(old, nw)
			if len(tc.wantRestart) > 0 {
				want = old.Domains
			}
			if !slices.Equal(nw.Domains, want) || nw.Limits.MaxRunning != 3 {
				t.Errorf("got domains %v max_running %d, want domains %v and the new limit 3", nw.Domains, nw.Limits.MaxRunning, want)
			}
		})
	}
	// Leaving wildcard is itself a restart (tls.acme); until then the
	// running wildcard setup decides, so the domains wait too.
	old, err := parse("a.yaml", []byte(realBase+wildcard), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	nw, err := parse("a.yaml", []byte("domain: preview.example.org\n"+strings.TrimPrefix(realBase, "domain: preview.example.com\n")+"tls: {mode: acme}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RestartNeeded(old, nw), []string{"tls.acme", "domain"}; !slices.Equal(got, want) {
		t.Errorf("wildcard to on-demand: got restart %v, want %v", got, want)
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	a, b := &Config{DataDir: "a"}, &Config{DataDir: "b"}
	s := NewStore(a)
	if s.Load() != a {
		t.Fatal("got another config, want a")
	}
	if old := s.Swap(b); old != a || s.Load() != b {
		t.Errorf("Swap: got old %v now %v, want a then b", old, s.Load())
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "previewgate.yaml")
	if err := WriteFile(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
		t.Errorf("got a backup for a new file (%v), want none", err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ path, want string }{{path, "two"}, {path + ".bak", "one"}} {
		got, err := os.ReadFile(f.path)
		if err != nil || string(got) != f.want {
			t.Errorf("%s: got %q, %v; want %q", f.path, got, err, f.want)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("got mode %v, want 0640 kept", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("got %d files, want 2 (no temp files left)", len(entries))
	}
}

// TestRestartNeededLimits: the limits the sandbox manager and the listeners
// take at start are reported, not silently ignored; max_running is live.
func TestRestartNeededLimits(t *testing.T) {
	old := Default()
	next := Default()
	next.Limits.MaxConcurrentStarts = 9
	next.Limits.ReadHeaderTimeout = Duration(time.Second)
	next.Limits.MaxRunning = 7
	got := RestartNeeded(old, next)
	want := []string{"limits.max_concurrent_starts", "limits.read_header_timeout"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestWriteFileThroughSymlink: a config path that is a symlink (the
// operator keeps the file elsewhere, in a repository checkout or a
// dotfiles tree) stays one: the file it points at gets the new content,
// its .bak beside it, instead of the link being replaced by a copy that
// the operator's own file no longer governs.
func TestWriteFileThroughSymlink(t *testing.T) {
	t.Parallel()
	real := filepath.Join(t.TempDir(), "real.yaml")
	link := filepath.Join(t.TempDir(), "previewgate.yaml")
	if err := os.WriteFile(real, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the config path is no longer a symlink (%v, %v)", st.Mode(), err)
	}
	for _, f := range []struct{ path, want string }{{real, "two"}, {link, "two"}, {real + ".bak", "one"}} {
		got, err := os.ReadFile(f.path)
		if err != nil || string(got) != f.want {
			t.Errorf("%s: got %q, %v; want %q", f.path, got, err, f.want)
		}
	}
}

// Validate loads the file at path and returns its problems, if any.
func Validate(path string) error {
	_, err := Load(path)
	return err
}

// Swap makes c the current config and returns the previous one.
func (s *Store) Swap(c *Config) *Config { return s.p.Swap(c) }

// WriteFile replaces the file at path with data as Replace does (stageFile).
func WriteFile(path string, data []byte) error {
	s, err := stageFile(path, data)
	if err != nil {
		return err
	}
	if err := s.publish(); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	syncDir(path)
	return nil
}
