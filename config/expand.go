package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/token"
)

// scalar returns n's value with ${VAR} expanded, and its YAML tag ("" when
// expansion changed the text, so the target type decides how to read it).
func (d *decoder) scalar(n *node, path string) (string, string, bool) {
	if n.kind != scalarNode { // path is never the document's: that is a struct
		d.errAt(n.pos, "%s: expected a single value, got %s", path, kindName(n))
		return "", "", false
	}
	if n.tk != nil {
		d.reads[n.tk]++
	}
	tag := n.tag
	switch tag {
	case strTag, intTag, floatTag, boolTag, nullTag, tsTag:
	default:
		d.errAt(n.pos, "%s: unsupported YAML tag %s", path, n.tag)
		return "", "", false
	}
	if !strings.Contains(n.value, "$") {
		return n.value, tag, true
	}
	s, off, err := expand(n.value, d.lookup)
	if err != nil {
		d.errAt(exprPos(n, off), "%s: %v", path, err)
		d.unexpanded[n.pos] = true
		return "", "", false
	}
	if s != n.value {
		tag = ""
		if s != "" {
			d.expanded[s] = n.value
		}
	}
	return s, tag, true
}

// unexpand writes, in msg, each value of expanded (a value ${VAR}
// expansion made -> the text it was made from) as that text: an
// environment value (the signing key, say) is never echoed back by an
// error, which the admin API shows to whoever sent the text and a failed
// reload logs. Values are replaced as msg writes them, through quote
// (strconv.Quote for the decoder's %q; none for a file error's path),
// longest first.
func unexpand(msg string, expanded map[string]string, quote func(string) string) string {
	repl := make(map[string]string, len(expanded))
	for v, text := range expanded {
		repl[quote(v)] = quote(text) + " (its value not shown)"
	}
	return replaceLongest(msg, repl)
}

// replaceLongest replaces in s each key of repl by its value, longest key
// first, so that a value inside another is not half replaced.
func replaceLongest(s string, repl map[string]string) string {
	olds := slices.Collect(maps.Keys(repl))
	slices.SortFunc(olds, func(a, b string) int { return len(b) - len(a) })
	for _, old := range olds {
		if old != "" {
			s = strings.ReplaceAll(s, old, repl[old])
		}
	}
	return s
}

// exprPos is the position of byte off of n's value in the file: exact for
// plain and simple quoted single-line scalars, else the scalar's start.
func exprPos(n *node, off int) Pos {
	p := n.pos
	if n.tk == nil || strings.ContainsAny(n.value, "\n\\'\"") {
		return p
	}
	p.Col += off
	if n.tk.Type == token.SingleQuoteType || n.tk.Type == token.DoubleQuoteType {
		p.Col++
	}
	return p
}

// expand replaces ${NAME} and ${NAME:-default} with the environment's value.
// "$${" is a literal "${"; any other "$" is left alone. A missing variable
// without a default is an error; off is the byte offset of the expression.
func expand(s string, lookup func(string) (string, bool)) (out string, off int, err error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", i, fmt.Errorf("unterminated ${ (write $${ for a literal ${)")
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", i, fmt.Errorf("invalid variable name in ${%s}", expr)
		}
		val, ok := lookup(name)
		switch {
		case ok && (val != "" || !hasDef):
			b.WriteString(val)
		case hasDef:
			b.WriteString(def)
		default:
			return "", i, fmt.Errorf("environment variable %s is not set", name)
		}
		i += end + 1
	}
	return b.String(), 0, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
