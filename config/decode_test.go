package config

import (
	"errors"
	"strings"
	"testing"
)

// base is a minimal valid config; cases append lines from line 6 on. The
// last top-level key is templates, so "  name: ..." lines add templates.
const base = `domain: preview.localhost
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
templates:
  web: {image: nginx}
`

// realBase is base on a real domain, for cases with TLS on (ACME cannot
// certify a localhost name; plain HTTP cannot keep a cookie on a real one).
var realBase = strings.Replace(base, "preview.localhost", "preview.example.com", 1)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseMinimal(t *testing.T) {
	t.Parallel()
	c, err := parse("min.yaml", []byte(base), env(nil))
	if err != nil {
		t.Fatalf("got %v, want no error", err)
	}
	if c.DefaultTemplate != "web" {
		t.Errorf("got default_template %q, want web (the only template)", c.DefaultTemplate)
	}
	if c.Path != "min.yaml" {
		t.Errorf("got Path %q, want min.yaml", c.Path)
	}
	if got := c.Templates["web"].Port; got != 3000 {
		t.Errorf("got port %d, want default 3000", got)
	}
}

// TestParseErrors has one case per kind of bad config; each asserts the
// exact FILE:LINE:COL of the offending value.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string // complete file
		want string // "LINE:COL: " prefix after the file name
		msg  string // part of the message
	}{
		{"unknown top-level key", base + "domian: x\n", "6:1", `unknown key "domian"`},
		{"unknown key suggests", base + "lmits: {}\n", "6:1", `did you mean "limits"`},
		{"unknown template key", base + "  t2:\n    image: x\n    memroy: 1GiB\n", "8:5", `templates.t2: unknown key "memroy"`},
		{"unknown key in list item", base + "routes:\n  - host: a.example.com\n    upstream: http://x\n    sandbx: y\n", "9:5", `unknown key "sandbx"`},
		{"duplicate key", base + "log:\n  level: info\n  level: debug\n", "8:3", `duplicate key "level"`},
		{"int gets string", base + "  t2:\n    image: x\n    port: \"3000\"\n", "8:11", "expected an integer, got a string"},
		{"int gets a fraction", base + "  t2:\n    image: x\n    port: 3000.7\n", "8:11", "expected an integer, got a number"},
		{"int gets list", base + "  t2:\n    image: x\n    pids: [1]\n", "8:11", "expected a single value, got a list"},
		{"bool gets yes", base + "  t2:\n    image: x\n    public: yes\n", "8:13", "expected true or false"},
		{"float gets string", base + "  t2:\n    image: x\n    cpus: lots\n", "8:11", "expected a number"},
		{"mapping gets scalar", base + "limits: 5\n", "6:9", "limits: expected a mapping, got an integer"},
		{"list gets scalar", base + "  t2:\n    image: x\n    cmd: /bin/sh\n", "8:10", "expected a list, got a string"},
		{"duration without unit", base + "  t2:\n    image: x\n    idle_timeout: 15\n", "8:19", "needs a unit"},
		{"bad duration", base + "  t2:\n    image: x\n    remove_after: 1day\n", "8:19", `invalid duration "1day"`},
		{"negative duration", base + "limits:\n  start_queue_timeout: -5s\n", "7:24", "must not be negative"},
		{"bad size unit", base + "  t2:\n    image: x\n    memory: 1GiBs\n", "8:13", `invalid size "1GiBs"`},
		{"bad size text", base + "limits:\n  max_header_bytes: lots\n", "7:21", `invalid size "lots"`},
		{"size float bytes", base + "limits:\n  max_header_bytes: 1.5\n", "7:21", "whole number"},
		{"too small memory", base + "  t2:\n    image: x\n    memory: 100\n", "8:13", "at least 6MiB"},
		{"bad CIDR", base + "trusted_proxies:\n  - 10.0.0.0/8\n  - 10.0.0.0/33\n", "8:5", `invalid CIDR "10.0.0.0/33"`},
		{"bad IP", base + "trusted_proxies: [10.0.0.300]\n", "6:19", "invalid CIDR or IP"},
		{"upstream not absolute", base + "routes:\n  - host: a.example.com\n    upstream: /status\n", "8:15", "must be absolute http:// or https://"},
		{"upstream ftp", base + "routes:\n  - host: a.example.com\n    upstream: ftp://x/\n", "8:15", "must be absolute"},
		{"jwks_url relative", "domain: preview.localhost\nauth:\n  jwks_url: /jwks.json\n", "3:13", "auth.jwks_url: invalid URL"},
		{"acme ca not URL", base + "tls:\n  mode: acme\n  acme:\n    ca: letsencrypt\n", "9:9", "tls.acme.ca: invalid URL"},
		{"default_template missing", base + "default_template: nextjs\n", "6:19", `default_template: template "nextjs" is not defined`},
		{"duplicate route host", base + "routes:\n  - {host: a.example.com, sandbox: a}\n  - {host: A.Example.com, sandbox: b}\n", "8:12", `duplicate route host "a.example.com"`},
		{"route both", base + "routes:\n  - {host: a.example.com, sandbox: a, upstream: \"http://x\"}\n", "7:5", "both sandbox and upstream"},
		{"route neither", base + "routes:\n  - host: a.example.com\n    public: true\n", "7:5", "needs a sandbox or an upstream"},
		{"route bad sandbox id", base + "routes:\n  - host: a.example.com\n    sandbox: Docs_1\n", "8:14", `invalid sandbox id "Docs_1"`},
		{"route sandbox id too long", base + "routes:\n  - host: a.example.com\n    sandbox: " + strings.Repeat("a", 56) + "\n", "8:14", "invalid sandbox id"},
		{"route unknown template", base + "routes:\n  - host: a.example.com\n    sandbox: a\n    template: nope\n", "9:15", `template "nope" is not defined`},
		{"route bad host", base + "routes:\n  - host: a_b.example.com\n    sandbox: a\n", "7:11", "not a hostname"},
		{"route sandbox host", base + "routes:\n  - host: sandbox-x.preview.localhost\n    sandbox: a\n", "7:11", "is a sandbox host"},
		{"tls mode", base + "tls:\n  mode: letsencrypt\n", "7:9", `invalid mode "letsencrypt"`},
		{"acme strategy", base + "tls:\n  mode: acme\n  acme: {strategy: dns}\n", "8:20", `invalid strategy "dns"`},
		{"idle_action", base + "  t2:\n    image: x\n    idle_action: kill\n", "8:18", `invalid idle_action "kill"`},
		{"cold_start", base + "  t2:\n    image: x\n    cold_start: spinner\n", "8:17", `invalid cold_start "spinner"`},
		{"host_header", base + "  t2:\n    image: x\n    host_header: keep\n", "8:18", `invalid host_header "keep"`},
		{"ports without port", base + "  t2:\n    image: x\n    ports: [8000]\n", "8:12", "ports must include port (3000)"},
		{"ports out of range", base + "  t2:\n    image: x\n    ports: [3000, 70000]\n", "8:12", "ports: 70000 out of range"},
		{"ports twice", base + "  t2:\n    image: x\n    ports: [3000, 3000]\n", "8:12", "ports: 3000 listed twice"},
		{"log level", base + "log: {level: verbose}\n", "6:14", `invalid log level "verbose"`},
		{"key without kid", "domain: preview.localhost\nauth:\n  keys:\n    - alg: EdDSA\n      public_key_file: k.pub\n", "4:7", "key needs a kid"},
		{"key without alg", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      public_key_file: k.pub\n", "4:7", "key needs an alg"},
		{"alg not allowed", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: none\n", "5:12", `invalid alg "none"`},
		{"alg RS512 not allowed", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: RS512\n      public_key_file: k.pub\n", "5:12", `invalid alg "RS512"`},
		{"hmac with key file", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: HS256\n      public_key_file: k.pub\n", "5:12", "alg HS256 needs a secret"},
		{"hmac with key file and secret", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: HS256\n      secret: 0123456789abcdef0123456789abcdef\n      public_key_file: k.pub\n", "7:24", "uses a shared secret, not key files"},
		{"eddsa with secret", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: EdDSA\n      secret: abc\n", "6:15", "uses public_key_file, not a secret"},
		{"hmac secret too short", "domain: preview.localhost\nauth:\n  keys:\n    - kid: k1\n      alg: HS256\n      secret: short\n", "6:15", "at least 32 bytes, got 5"},
		{"duplicate kid", "domain: preview.localhost\nauth:\n  keys:\n    - {kid: k1, alg: EdDSA, public_key_file: a}\n    - {kid: k1, alg: EdDSA, public_key_file: b}\n", "5:13", `duplicate kid "k1"`},
		{"no keys", "domain: preview.localhost\nauth:\n  audience: x\n", "3:3", "at least one of keys and jwks_url"},
		{"missing domain", "auth:\n  keys: [{kid: k1, alg: EdDSA, public_key_file: k}]\n", "1:1", "domain is required"},
		{"empty file", "", "1:1", "domain is required"},
		{"domain not hostname", "domain: [preview.localhost, \"*.example.com\"]\n" + base[len("domain: preview.localhost\n"):], "1:29", `invalid domain "*.example.com"`},
		{"domain with port", "domain: preview.localhost:443\n" + base[len("domain: preview.localhost\n"):], "1:9", "not a hostname"},
		{"template port out of range", base + "  t2:\n    image: x\n    port: 70000\n", "8:11", "port 70000 out of range"},
		{"listen port out of range", base + "listen:\n  admin: \"127.0.0.1:99999\"\n", "7:10", `port "99999" out of range`},
		{"listen not an address", base + "listen:\n  http: localhost\n", "7:9", "invalid address"},
		{"metrics listener not an address", base + "listen:\n  metrics: \"9091\"\n", "7:12", "invalid address"},
		{"metrics listener on the admin address", base + "listen:\n  admin: \"127.0.0.1:9090\"\n  metrics: \"127.0.0.1:9090\"\n", "8:12", "same address as listen.admin"},
		{"negative max_running", base + "limits:\n  max_running: -1\n", "7:16", "must not be negative, got -1"},
		{"negative rate", base + "limits:\n  per_ip:\n    rate: -1\n    burst: 5\n", "8:11", "rate must not be negative"},
		{"negative pool", base + "  t2:\n    image: x\n    pool: -2\n", "8:11", "pool must not be negative"},
		{"rate without burst", base + "limits:\n  per_sandbox: {rate: 10}\n", "7:16", "burst must be at least 1"},
		{"files mode without files", base + "tls:\n  mode: files\n  cert_file: /x.crt\n", "7:9", "needs tls.cert_file and tls.key_file"},
		{"wildcard without rfc2136", base + "tls:\n  mode: acme\n  acme:\n    strategy: wildcard\n", "9:15", "needs acme.rfc2136.server"},
		{"template without image", base + "  t2:\n    port: 8080\n", "7:5", "template needs an image"},
		{"bad template name", base + "  \"my template\": {image: x}\n", "6:3", `invalid template name "my template"`},
		{"allowed origin with path", base[:len(base)-len("templates:\n  web: {image: nginx}\n")] + "  allowed_origins: [https://app.example.com/x]\n" + "templates:\n  web: {image: nginx}\n", "4:21", "invalid origin"},
		{"short admin token", base + "admin_token: abc\n", "6:14", "admin_token is too short"},
		{"bad tag", base + "data_dir: !!binary aGVsbG8=\n", "6:11", "unsupported YAML tag"},
		{"missing env var", base + "admin_token: ${NOPE_TOKEN}\n", "6:14", "environment variable NOPE_TOKEN is not set"},
		{"missing env var mid-string", base + "data_dir: /var/${NOPE_DIR}/x\n", "6:16", "environment variable NOPE_DIR is not set"},
		{"missing env var quoted", base + "data_dir: \"/v/${NOPE_DIR}\"\n", "6:15", "NOPE_DIR is not set"},
		{"unterminated env", base + "data_dir: ${HOME\n", "6:11", "unterminated ${"},
		{"env expands to bad int", base + "  t2:\n    image: x\n    port: ${PORT_TEXT}\n", "8:11", `invalid integer "${PORT_TEXT}" (its value not shown)`},
		{"syntax error", base + "log: {level: info\n", "6:6", "invalid YAML"},
		{"tab indentation", base + "log:\n\tlevel: info\n", "7:1", "invalid YAML"},
		{"two documents", base + "---\ndomain: x\n", "7:1", "only one YAML document"},
		{"root is a list", "- a\n- b\n", "1:1", "expected a mapping, got a list"},
	}
	lookup := env(map[string]string{"PORT_TEXT": "abc"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse("bad.yaml", []byte(tt.yaml), lookup)
			if err == nil {
				t.Fatalf("got no error, want %s: ...%s", tt.want, tt.msg)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("got %T (%v), want ErrorList", err, err)
			}
			prefix := "bad.yaml:" + tt.want + ": "
			for _, e := range list {
				if strings.HasPrefix(e.Error(), prefix) && strings.Contains(e.Msg, tt.msg) {
					return
				}
			}
			t.Errorf("got\n%v\nwant a line starting %q containing %q", err, prefix, tt.msg)
		})
	}
}

func TestErrorListFormat(t *testing.T) {
	t.Parallel()
	_, err := parse("f.yaml", []byte(base+"log: {level: loud, format: xml}\ndefault_template: nope\n"), env(nil))
	want := "f.yaml:6:14: log.level: invalid log level \"loud\" (want debug, info, warn or error)\n" +
		"f.yaml:6:28: log.format: invalid log format \"xml\" (want auto, text or json)\n" +
		"f.yaml:7:19: default_template: template \"nope\" is not defined in templates"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 6 || e.Col != 14 {
		t.Errorf("errors.As(*Error): got %+v, want the first error at 6:14", e)
	}
}

func TestParseNeverEchoesSecrets(t *testing.T) {
	t.Parallel()
	secret := "hunter2-but-not-long-enough"
	_, err := parse("s.yaml", []byte("domain: x.example.com\nauth:\n  keys:\n    - {kid: k, alg: HS512, secret: ${S}}\n"), env(map[string]string{"S": secret}))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("got %v, want an error without the secret", err)
	}
}

// TestCapAdd: cap_add takes only capabilities that keep a sandbox inside
// its container; ALL and the isolation-breaking ones are refused at the
// offending name (#13).
func TestCapAdd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		caps string // the cap_add value on line 8, starting at column 14
		want string // "" for valid, else "LINE:COL: " prefix
		msg  string
	}{
		{"harmless", "[NET_BIND_SERVICE, CHOWN, CAP_SETUID, KILL]", "", ""},
		{"empty", "[]", "", ""},
		{"SYS_ADMIN", "[NET_BIND_SERVICE, SYS_ADMIN]", "8:33", "templates.t2.cap_add[1]: capability SYS_ADMIN is not allowed: it would let a sandbox break out"},
		{"ALL", "[ALL]", "8:15", "capability ALL is not allowed"},
		{"CAP_ prefix", "[CAP_SYS_MODULE]", "8:15", "capability SYS_MODULE is not allowed"},
		{"SYS_PTRACE", "[SYS_PTRACE]", "8:15", "SYS_PTRACE is not allowed"},
		{"NET_ADMIN", "[NET_ADMIN]", "8:15", "NET_ADMIN is not allowed"},
		{"NET_RAW", "[NET_RAW]", "8:15", "NET_RAW is not allowed"},
		{"DAC_READ_SEARCH", "[DAC_READ_SEARCH]", "8:15", "DAC_READ_SEARCH is not allowed"},
		{"BPF", "[BPF]", "8:15", "BPF is not allowed"},
		{"unknown", "[FLY]", "8:15", `invalid capability "FLY" (allowed: AUDIT_WRITE`},
		{"lowercase", "[sys_admin]", "8:15", `invalid capability "sys_admin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse("caps.yaml", []byte(base+"  t2:\n    image: x\n    cap_add: "+tt.caps+"\n"), env(nil))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if prefix := "caps.yaml:" + tt.want + ": "; err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %v, want %q...%q", err, prefix, tt.msg)
			}
		})
	}
}

// TestCreatesPerSubjectPerHour: the per-subject create cap is on by
// default (#13); -1 turns it off and is kept as written.
func TestCreatesPerSubjectPerHour(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, yaml string
		want       int
		err        string
	}{
		{"default", base, 25, ""},
		{"empty key", base + "limits:\n  creates_per_subject_per_hour:\n", 25, ""},
		{"default follows max_running", base + "limits:\n  max_running: 7\n", 3, ""},
		{"at least one", base + "limits:\n  max_running: 1\n", 1, ""},
		{"set", base + "limits:\n  creates_per_subject_per_hour: 5\n", 5, ""},
		{"unlimited", base + "limits:\n  creates_per_subject_per_hour: -1\n", -1, ""},
		{"below -1", base + "limits:\n  creates_per_subject_per_hour: -2\n", 0, "c.yaml:7:33: limits.creates_per_subject_per_hour: must be positive, or -1 for unlimited, got -2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parse("c.yaml", []byte(tt.yaml), env(nil))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Limits.CreatesPerSubjectPerHour; got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// TestParseErrorsHideEnvValues: an error about a value ${VAR} expansion
// made quotes the file's text, never the environment's value: a validate
// or PUT body naming the signing key's variable in a field whose error
// quotes its value would otherwise read it back (the admin API shows the
// errors; a failed reload logs them).
func TestParseErrorsHideEnvValues(t *testing.T) {
	t.Parallel()
	const secret = "fedcba9876543210fedcba9876543210"
	lookup := env(map[string]string{"K2_SECRET": secret})
	for _, yaml := range []string{
		"domain: preview.localhost\nlog: {level: \"${K2_SECRET}\"}\n",
		"domain: preview.localhost\nlog: {level: \"x${K2_SECRET}\"}\n",
		"domain: ${K2_SECRET}\n",
		"domain: preview.localhost\ntemplates:\n  t: {image: x, port: \"${K2_SECRET}\"}\n",
	} {
		_, err := parse("bad.yaml", []byte(yaml), lookup)
		if err == nil {
			t.Fatalf("%q: no error", yaml)
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "${K2_SECRET}") {
			t.Errorf("%q: got %v, want the expression quoted, not its value", yaml, err)
		}
	}
}
