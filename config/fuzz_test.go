package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
)

// FuzzParse: malformed input never panics, every error carries a position,
// and a config that parses can be shown and is given back as written by
// its tokens. Nesting (#13): a document nested
// deeper than MaxDepth is never accepted, and checkBounds never refuses a
// YAML document that is not.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(fixtures, "*.yaml"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{base, base + "routes:\n  - {host: a.example.com, sandbox: a}\n",
		"a: &x [*x]\n", "<<: {domain: x}\n", "domain: ${X:-a.b}\n", "templates: {a: {<<: [{image: x}]}}\n",
		"domain: [\n", "\t", "---\n---\n", "!!binary x: y\n", "? [a]\n: b\n",
		strings.Repeat("[", MaxDepth+1), strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat("{a: ", MaxDepth+1), strings.Repeat("- ", MaxDepth+1) + "x\n",
		"a:\n  - b:\n      - c: [d, {e: \"[[\"}]\n", "a: |\n  [[[\nb: 'it''s [' # [\n",
		base + "templates:\n  " + strings.Repeat("x: {", MaxDepth) + "\n", lol()[:2000]} {
		f.Add([]byte(s))
	}
	lookup := env(fullEnv)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, pm := checkBounds(data); pm != nil {
			if depth, ok := yamlDepth(data); ok && depth <= MaxDepth {
				t.Fatalf("checkBounds refused a document %d deep: %d:%d: %s", depth, pm.Line, pm.Col, pm.msg)
			}
		}
		c, err := parse("fuzz.yaml", data, lookup)
		if err == nil {
			if depth, _ := yamlDepth(data); depth > MaxDepth {
				t.Fatalf("accepted a document %d deep", depth)
			}
		}
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
		// The document model gives back a valid file as written, which
		// ParseUpdate's edits rely on, or refuses: it never writes a file
		// changed where nobody edited it. (goccy's tokens do not give back
		// every file's text: "jwks_url: http://0\ntemplates:" at the end
		// of a file is one, found by this target in CI.)
		d := &decoder{file: "fuzz.yaml"}
		if _, err := d.parseYAML(lexer.Tokenize(string(data))); err == nil && d.first != nil {
			out, err := rewrite("fuzz.yaml", data, d.first, nil)
			if err == nil && string(out) != string(data) {
				t.Fatalf("rewrite without edits: got %q; want the file as written or a refusal", out)
			}
		}
	})
}

// yamlDepth is how deeply lists and mappings nest in data as the parser
// reads it (aliases not followed); ok is false if it does not read it as
// one document.
func yamlDepth(data []byte) (depth int, ok bool) {
	if len(data) > MaxSize {
		return 0, false
	}
	d := &decoder{file: "depth.yaml"}
	root, err := d.parseYAML(lexer.Tokenize(string(data)))
	if err != nil {
		return 0, false
	}
	var walk func(n ast.Node) int
	walk = func(n ast.Node) int {
		switch n := n.(type) {
		case *ast.AnchorNode:
			return walk(n.Value)
		case *ast.TagNode:
			return walk(n.Value)
		case *ast.MappingKeyNode:
			return walk(n.Value)
		case *ast.MappingValueNode:
			return max(walk(n.Key), walk(n.Value)) + 1
		case *ast.MappingNode:
			d := 0
			for _, mv := range n.Values {
				d = max(d, walk(mv.Key), walk(mv.Value))
			}
			return d + 1
		case *ast.SequenceNode:
			d := 0
			for _, c := range n.Values {
				d = max(d, walk(c))
			}
			return d + 1
		}
		return 0
	}
	return walk(root), true
}

// FuzzParseUpdate: a PUT body replacing a running file (REDACTED restored)
// never panics, and what it would write to the file reads back as the
// config it applies: a REDACTED splice on goccy's tokens that went wrong
// is caught, never written.
func FuzzParseUpdate(f *testing.F) {
	dump := func(src string) string {
		c, err := parse("live.yaml", []byte(src), env(liveEnv))
		if err != nil {
			f.Fatal(err)
		}
		out, err := c.Redacted()
		if err != nil {
			f.Fatal(err)
		}
		return string(out)
	}
	d := dump(liveSrc)
	f.Add([]byte(liveSrc), []byte(d))
	f.Add([]byte(liveSrc), []byte(strings.Replace(d, "image: nginx\n", "image: nginx:2\n", 1)))
	f.Add([]byte("# c\n"+liveSrc+"log:\n  level: info # x\n"), []byte(strings.Replace(d, "level: info", "level: debug", 1)))
	f.Add([]byte(liveSrc+"limits: {max_running: 3}\n"), []byte(strings.Replace(d, "max_running: 50", "max_running: 9", 1)))
	f.Fuzz(func(t *testing.T, file, body []byte) {
		live, err := parse("live.yaml", file, env(liveEnv))
		if err != nil {
			return
		}
		c, out, err := parseUpdate("live.yaml", body, live, env(liveEnv))
		if err != nil {
			return
		}
		back, err := parse("live.yaml", out, env(liveEnv))
		if err != nil {
			t.Fatalf("the file to write does not parse: %v\n%s", err, out)
		}
		if diff := Changed(back, c); len(diff) > 0 {
			t.Fatalf("the file to write reads differently at %v:\n%s", diff, out)
		}
	})
}
