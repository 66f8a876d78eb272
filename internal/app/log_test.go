package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/config"
)

// TestLogComponentOnce: a logger tagged with a component and tagged again
// by the package it was handed to writes one "component" key, the inner
// one (#16: the gateway's auth verifier and certs logged two).
func TestLogComponentOnce(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log := newLogger(config.Log{Level: "info", Format: format}, &buf)
		log.With("component", "gateway").With("x", 1).With("component", "auth").Info("hello", "k", "v")
		log.With("component", "certs").WithGroup("g").Info("grouped", "component", "inner")
		log.Info("plain")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: got %d lines, want 3:\n%s", format, len(lines), buf.String())
		}
		if n := strings.Count(lines[0], "component"); n != 1 {
			t.Errorf("%s: %d component keys in %s, want 1", format, n, lines[0])
		}
		if !strings.Contains(lines[0], "auth") || strings.Contains(lines[0], "gateway") ||
			!strings.Contains(lines[0], "x") || !strings.Contains(lines[0], "k") {
			t.Errorf("%s: got %s, want component auth, x and k", format, lines[0])
		}
		if strings.Contains(lines[2], "component") {
			t.Errorf("%s: untagged record got a component: %s", format, lines[2])
		}
		if format != "json" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[1]), &rec); err != nil {
			t.Fatal(err)
		}
		g, _ := rec["g"].(map[string]any)
		if rec["component"] != "certs" || g["component"] != "inner" {
			t.Errorf("grouped record: got %s, want component certs and g.component inner", lines[1])
		}
	}
}
