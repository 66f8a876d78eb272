package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocBound is what refusing any hostile file here may cost: the 200 KB
// bombs cost about 57 MB (tokenizing, about 300 bytes a token); before #13
// the 200 KB bomb took 15 GB.
const allocBound = 64 << 20

// allocated returns the bytes allocated while f ran. The tests that use it
// are not parallel, so the figure is theirs.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// lol is a "billion laughs" built from merge keys: l9 stands for 10^9
// templates' worth of keys, and every route expands it again.
func lol() string {
	var b strings.Builder
	b.WriteString("domain: preview.localhost\nauth:\n  keys: [{kid: k1, alg: HS256, secret: \"0123456789abcdef0123456789abcdef\"}]\n")
	b.WriteString("anchors:\n  l0: &l0 {image: x}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d {<<: [%s*l%d]}\n", i, i, strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 9), i-1)
	}
	b.WriteString("templates:\n  web: {<<: *l9}\n")
	b.WriteString("routes: [" + strings.Repeat("*l9, ", 5000) + "*l9]\n")
	return b.String()
}

// TestParseRefusesBombs: input built to exhaust the parsers is refused with
// a FILE:LINE:COL error at the offending place, cheaply (#13).
func TestParseRefusesBombs(t *testing.T) {
	indented := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat(" ", i) + "a:\n")
		}
		return b.String()
	}
	tests := []struct {
		name string
		yaml string
		want string // "LINE:COL: " prefix after the file name
		msg  string
	}{
		// The bomb: 200 KB of "[" (68 s and 15 GB before).
		{"200KB of [", strings.Repeat("[", 200_000), "1:33", "nested more than 32 levels deep"},
		{"closed flow lists", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), "1:33", "nested more than 32"},
		{"flow mappings", strings.Repeat("{a: ", 50_000), "1:129", "nested more than 32"},
		{"inside a valid config", base + "routes: " + strings.Repeat("[", 200_000), "6:40", "nested more than 32"},
		{"block lists on one line", strings.Repeat("- ", 100_000) + "x\n", "1:65", "nested more than 32"},
		{"block mappings by indentation", indented(1000), "33:33", "nested more than 32"},
		{"after a quoted string with brackets", base + `routes: [x "y, "]]]]]", ` + strings.Repeat("[", 100_000), "6:55", "nested more than 32"},
		{"after a block scalar with a quote", base + "x: |\n  it's\nb: " + strings.Repeat("[", 100_000), "8:35", "nested more than 32"},
		{"larger than MaxSize", base + "#" + strings.Repeat("x", MaxSize) + "\n", "1:1", "larger than 1048576 bytes"},
		{"billion laughs with merge keys", lol(), "7:7", "document too large (more than 100000 values after alias expansion)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.yaml)
			var err error
			if got := allocated(func() { _, err = parse("bomb.yaml", data, env(nil)) }); got > allocBound {
				t.Errorf("got %d MiB allocated, want at most %d MiB", got>>20, allocBound>>20)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("got %T %v, want an ErrorList", err, err)
			}
			prefix := "bomb.yaml:" + tt.want + ": "
			for _, e := range list {
				if e.Line < 1 || e.Col < 1 || e.File != "bomb.yaml" {
					t.Errorf("got error without a position: %q", e.Error())
				}
				if strings.HasPrefix(e.Error(), prefix) && strings.Contains(e.Msg, tt.msg) {
					return
				}
			}
			t.Errorf("got\n%.2000v\nwant a line starting %q containing %q", err, prefix, tt.msg)
		})
	}
}

// TestLoadRefusesHugeFile: the CLI's config validate reads no more of a
// huge file than the limit.
func TestLoadRefusesHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(path, []byte(strings.Repeat("[", 16*MaxSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if got := allocated(func() { err = Validate(path) }); got > 8*MaxSize {
		t.Errorf("got %d MiB allocated for a %d MiB file, want at most %d MiB", got>>20, 16, 8)
	}
	if want := path + ":1:1: config is larger than"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %q...", err, want)
	}
}

// TestCheckBoundsCountsStructureOnly: nesting up to MaxDepth passes and one
// level more is refused, whatever the style; brackets and indentation that
// are text (quoted, commented, block or plain scalars) do not count.
func TestCheckBoundsCountsStructureOnly(t *testing.T) {
	t.Parallel()
	flow := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	flowMap := func(n int) string { return strings.Repeat("{a: ", n) + "b" + strings.Repeat("}", n) }
	dashes := func(n int) string { return strings.Repeat("- ", n) + "x\n" }
	indented := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat("  ", i) + "a:\n")
		}
		return b.String()
	}
	listsOfMaps := func(n int) string {
		var b strings.Builder
		for i := range n / 2 {
			b.WriteString(strings.Repeat("    ", i) + "- a:\n")
		}
		return b.String()
	}
	brackets := strings.Repeat("[{", 100)
	tests := []struct {
		name string
		yaml string
		ok   bool
	}{
		{"flow lists at the limit", flow(MaxDepth), true},
		{"flow lists past the limit", flow(MaxDepth + 1), false},
		{"flow mappings at the limit", flowMap(MaxDepth), true},
		{"flow mappings past the limit", flowMap(MaxDepth + 1), false},
		{"block lists at the limit", dashes(MaxDepth), true},
		{"block lists past the limit", dashes(MaxDepth + 1), false},
		{"block mappings at the limit", indented(MaxDepth), true},
		{"block mappings past the limit", indented(MaxDepth + 1), false},
		{"lists of mappings at the limit", listsOfMaps(MaxDepth), true},
		{"lists of mappings past the limit", listsOfMaps(MaxDepth + 2), false},
		{"block then flow at the limit", "a:\n  b: " + flow(MaxDepth-2) + "\n", true},
		{"block then flow past the limit", "a:\n  b: " + flow(MaxDepth-1) + "\n", false},
		{"siblings do not add up", strings.Repeat("- "+flow(MaxDepth-1)+"\n", 100) + strings.Repeat("k: "+flow(MaxDepth-1)+"\n", 100), true},
		{"double quoted", "a: \"" + brackets + "\\\" " + brackets + "\"\n", true},
		{"single quoted", "a: '" + brackets + "'' " + brackets + "'\n", true},
		{"quoted in flow", "a: [\"" + brackets + "\", '" + brackets + "']\n", true},
		{"multi-line quoted", "a: \"x\n  " + brackets + "\n  \"\n", true},
		{"comment", "# " + brackets + "\na: b # " + brackets + "\n", true},
		{"comment in flow", "a: [b, # " + brackets + "\n  c]\n", true},
		{"literal block", "a: |\n  " + brackets + "\n  it's\n    " + brackets + "\nb: c\n", true},
		{"folded block in a list", "- >-\n  " + brackets + "\n- x\n", true},
		{"plain scalar", "a: x" + brackets + "\n", true},
		{"plain continuation", "a: x\n  " + brackets + "\n  " + brackets + "\n", true},
		{"anchor and tag", "a: &x !!seq " + flow(MaxDepth-1) + "\nb: *x\n", true},
		{"anchor and tag past the limit", "a: &x !!seq " + flow(MaxDepth) + "\n", false},
		{"json", `{"a": {"b": ["c", {"d": "]]]]"}]}}`, true},
		{"document markers", "%YAML 1.2\n--- " + flow(MaxDepth) + "\n...\n", true},
		{"at MaxSize", "#" + strings.Repeat("x", MaxSize-1), true},
		{"past MaxSize", "#" + strings.Repeat("x", MaxSize), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, pm := checkBounds([]byte(tt.yaml))
			switch {
			case tt.ok && pm != nil:
				t.Errorf("got %d:%d: %s, want no error", pm.Line, pm.Col, pm.msg)
			case !tt.ok && pm == nil:
				t.Errorf("got no error, want one")
			}
		})
	}
}

// TestSyntaxErrorColumnInLargeFile: with one parser there is no size
// below which a syntax error gets its column and above which it falls back
// to column 1 (before, goccy/go-yaml saw only files under 64 KiB).
func TestSyntaxErrorColumnInLargeFile(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("# padding padding padding padding padding padding padding\n", 2000) // ~116 KB
	data := []byte(pad + base + "log: {level: info\n")
	_, err := parse("big.yaml", data, env(nil))
	if want := "big.yaml:2006:6: invalid YAML"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %s...", err, want)
	}
}

// wideMapping is a config within MaxSize and MaxDepth whose one env mapping
// holds ~45,000 keys: goccy's parser is quadratic in a block mapping's
// size (v1.19.2: 25 s for 45,000 keys), so only the token count's MaxNodes
// keeps it away from the parser.
func wideMapping() []byte { return wideEnv(1 << 30) }

// wideEnv is a config whose one env mapping holds n keys, or as many as
// fit in MaxSize.
func wideEnv(n int) []byte {
	var b strings.Builder
	b.WriteString("domain: preview.localhost\ndefault_template: app\ntemplates:\n  app:\n    image: x\n    env:\n")
	for i := 0; i < n && b.Len() < MaxSize-64; i++ {
		fmt.Fprintf(&b, "      K%d: v\n", i)
	}
	return []byte(b.String())
}

// TestParseRefusesWideMapping: the 45,000-key mapping is refused with a
// position, before the parser runs (#13). BenchmarkParseBombs measures the
// cost of the refusal.
func TestParseRefusesWideMapping(t *testing.T) {
	data := wideMapping()
	_, err := Parse("keys.yaml", data)
	if err == nil || !strings.Contains(err.Error(), "keys.yaml:") || !strings.Contains(err.Error(), "more than 10000 keys and values") {
		t.Fatalf("a %d-byte config with one mapping of %d keys: got %.200v, want it refused with a position before the parser runs",
			len(data), strings.Count(string(data), "\n"), err)
	}
}

// BenchmarkParseBombs measures refusing hostile input: the 45,000-key
// mapping, the billion laughs of merge keys and aliases, and 200 KB of
// "[" (and MaxSize of it). Nothing asserts a time; TestParseRefusesBombs and
// TestParseRefusesWideMapping assert the refusals.
func BenchmarkParseBombs(b *testing.B) {
	for _, bomb := range []struct {
		name string
		data []byte
	}{
		{"wide-mapping-45k", wideMapping()},
		{"billion-laughs", []byte(lol())},
		{"200KB-of-[", []byte(strings.Repeat("[", 200_000))},
		{"MaxSize-of-[", []byte(strings.Repeat("[", MaxSize))}, // the costliest refusal: every byte a token
	} {
		b.Run(bomb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bomb.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("bomb.yaml", bomb.data); err == nil {
					b.Fatal("bomb accepted")
				}
			}
		})
	}
	// The widest mapping the bound lets through goes to the parser: the
	// worst cost of a file that is not refused (each key and its value are
	// two of MaxNodes; the rest of the file holds a few more).
	widest := wideEnv(MaxNodes/2 - 8)
	b.Run("widest-accepted-mapping", func(b *testing.B) {
		if _, err := Parse("wide.yaml", widest); err != nil && strings.Contains(err.Error(), "keys and values") {
			b.Fatalf("refused by the bound: %.200v", err)
		}
		b.SetBytes(int64(len(widest)))
		b.ReportAllocs()
		for b.Loop() {
			Parse("wide.yaml", widest)
		}
	})
}
