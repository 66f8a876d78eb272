package config

import (
	"strings"
	"testing"
)

// A written 0 of a key whose zero the defaults replace is an error at that
// key, alone: it read as off or never, and ran as the default.
func TestWrittenZeroThatMeansDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{"idle_timeout", base + "  t2:\n    image: x\n    idle_timeout: 0\n", "bad.yaml:8:19: templates.t2.idle_timeout: 0 is not off or unlimited here: it would mean the default (15m)"},
		{"idle_timeout 0s", base + "  t2:\n    image: x\n    idle_timeout: 0s\n", "bad.yaml:8:19: templates.t2.idle_timeout: 0 is not off or unlimited here: it would mean the default (15m)"},
		{"max_keep_up", base + "  t2:\n    image: x\n    max_keep_up: 0s\n", "bad.yaml:8:18: templates.t2.max_keep_up: 0 is not off or unlimited here: it would mean the default (4h)"},
		{"ready.timeout", base + "  t2:\n    image: x\n    ready: {timeout: 0s}\n", "bad.yaml:8:22: templates.t2.ready.timeout: 0 is not off or unlimited here: it would mean the default (1m)"},
		{"memory", base + "  t2:\n    image: x\n    memory: 0\n", "bad.yaml:8:13: templates.t2.memory: 0 is not off or unlimited here: it would mean the default (1GiB)"},
		{"port", base + "  t2:\n    image: x\n    port: 0\n", "bad.yaml:8:11: templates.t2.port: 0 is not off or unlimited here: it would mean the default (3000)"},
		{"max_running", base + "limits:\n  max_running: 0\n", "bad.yaml:7:16: limits.max_running: 0 is not off or unlimited here: it would mean the default (50)"},
		{"issue_per_hour", base + "tls:\n  acme: {issue_per_hour: 0}\n", "bad.yaml:7:26: tls.acme.issue_per_hour: 0 is not off or unlimited here: it would mean the default (20)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse("bad.yaml", []byte(tt.yaml), env(nil))
			if err == nil {
				t.Fatalf("got no error, want %s", tt.want)
			}
			if got := err.Error(); strings.Count(got, "\n") != 0 || !strings.HasPrefix(got, tt.want) {
				t.Errorf("got\n%v\nwant one line starting %q", got, tt.want)
			}
		})
	}
}

// Every number the defaults fill refuses a written 0, at its key: the
// rule is the defaults', so a new defaulted key cannot be left out of it.
// "key:" (null) still means the default, as the docs say.
func TestWrittenZeroOfEachDefaultedKey(t *testing.T) {
	t.Parallel()
	nest := func(path string) string { // "a.b.c" -> "{a: {b: {c: 0}}}" without the outer braces
		keys := strings.Split(path, ".")
		out := keys[len(keys)-1] + ": 0"
		for i := len(keys) - 2; i >= 0; i-- {
			out = keys[i] + ": {" + out + "}"
		}
		return out
	}
	keys := []string{"tls.acme.issue_per_hour", "auth.link_ttl", "auth.max_link_ttl", "docker.replicas"}
	for _, k := range []string{"max_concurrent_starts", "start_queue", "start_queue_timeout", "max_running",
		"websockets_per_sandbox", "websockets_per_ip", "max_header_bytes", "read_header_timeout", "idle_timeout",
		"body_timeout", "body_min_rate", "write_timeout", "connections_per_ip", "limiter_entries"} {
		keys = append(keys, "limits."+k)
	}
	for _, k := range []string{"port", "memory", "cpus", "pids", "ready.timeout", "idle_timeout", "max_socket_idle",
		"remove_after", "max_keep_up", "max_body"} {
		keys = append(keys, "templates.web."+k)
	}
	for _, k := range keys {
		t.Run(k, func(t *testing.T) {
			t.Parallel()
			yaml := base + nest(k) + "\n"
			if key, ok := strings.CutPrefix(k, "templates.web."); ok {
				yaml = strings.Replace(base, "web: {image: nginx}", "web: {image: nginx, "+nest(key)+"}", 1)
			} else if key, ok := strings.CutPrefix(k, "auth."); ok { // base has an auth mapping
				yaml = strings.Replace(base, "\nauth:\n", "\nauth:\n  "+nest(key)+"\n", 1)
			}
			_, err := parse("bad.yaml", []byte(yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), k+": 0 is not off or unlimited here") || strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("got %v, want one error at %s", err, k)
			}
			if _, err := parse("ok.yaml", []byte(strings.Replace(yaml, ": 0", ":", 1)), env(nil)); err != nil {
				t.Errorf("written as null: got %v, want the default", err)
			}
		})
	}
}

// Where 0 has a meaning of its own (off, no bound, derived), it stays valid.
func TestWrittenZeroWithItsOwnMeaning(t *testing.T) {
	t.Parallel()
	yaml := base + "  t2:\n    image: x\n    pool: 0\n" +
		"limits:\n  per_ip: {rate: 0}\n  max_running_per_subject: 0\n  creates_per_subject_per_hour: 0\n  max_connections: 0\n"
	if _, err := parse("ok.yaml", []byte(yaml), env(nil)); err != nil {
		t.Fatalf("got %v, want no error", err)
	}
}

// A template port out of range is one error at port, not a second one at
// 1:1 for the ports list the defaults made from it.
func TestTemplatePortOutOfRangeOnce(t *testing.T) {
	t.Parallel()
	_, err := parse("bad.yaml", []byte(base+"  t2:\n    image: x\n    port: 70000\n"), env(nil))
	want := "bad.yaml:8:11: templates.t2.port: port 70000 out of range 1-65535"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}
