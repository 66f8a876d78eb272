package config

import (
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
)

// A PUT whose body is not an edit of the file (a script that sends the
// effective config, comments gone) is applied to the file key by key, as a
// person would: each changed setting's entry is replaced, added under its
// parent or removed, and every other line (comments, order, layout) stays
// (#24, 2). Entries are found on goccy's AST, the document model rewrite
// edits too, and spliced as the lines their keys start. Only block-style
// mappings are edited; where the path goes through anything else (a flow
// mapping, an alias), or where the result would not read as the body does,
// the body is written as sent.

// isEditOf reports whether body looks like an edit of file: it keeps every
// comment line of the file. Then body is written as sent, comment edits
// included.
func isEditOf(body, file []byte) bool {
	b := string(body)
	for _, l := range strings.Split(string(file), "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") && !strings.Contains(b, t) {
			return false
		}
	}
	return true
}

// applySettings is ParseUpdate for a body c that is not an edit of live's
// file: the changed settings applied to the file instead, if that reads
// as the body does (then that config and text), else c and the body as
// sent. A derived default (creates_per_subject_per_hour from max_running)
// the body writes out is a setting too: what still differs after a merge
// is merged as well, a few rounds at most.
func applySettings(name string, body []byte, live, c *Config, lookup func(string) (string, bool)) (*Config, []byte) {
	paths := changedPaths(live, c)
	for range 3 {
		merged, ok := mergeInto(live.src, body, paths)
		if !ok {
			break
		}
		c2, err := parse(name, merged, lookup)
		if err != nil {
			break
		}
		more := changedPaths(c2, c)
		if len(more) == 0 && sameRaw(c.raw, c2.raw) {
			return c2, merged
		}
		paths = append(paths, more...)
	}
	return c, body
}

// sameRaw reports whether a and b hold the same non-empty texts: a dump
// writes out empty secrets the file leaves out.
func sameRaw(a, b map[string]string) bool {
	for _, m := range []map[string]string{a, b} {
		for k, v := range m {
			if v != "" && (a[k] != v || b[k] != v) {
				return false
			}
		}
	}
	return true
}

// yamlLines is a file as lines, without their newlines.
type yamlLines []string

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

func blankOrComment(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || strings.HasPrefix(t, "#")
}

// lineEntry is the lines [start, end) of one key's entry: its key line and
// what belongs to it, without trailing blank or comment lines.
type lineEntry struct {
	start, end int
	indent     int
}

// parseBody parses data into the body of its one document, the model the
// edit walks (nil for an empty document); ok false if it does not parse.
func parseBody(data []byte) (ast.Node, bool) {
	f, err := goccyParse(lexer.Tokenize(string(data)))
	if err != nil || len(f.Docs) > 1 {
		return nil, false
	}
	if len(f.Docs) == 0 {
		return nil, true
	}
	return f.Docs[0].Body, true
}

// find locates the entry of path in body, the goccy AST of the text ls
// holds: found false if a key on the path is missing, with depth the number
// of keys found and parent the last entry found. editable false where the
// path goes through something other than a block mapping (a flow mapping,
// an alias, a scalar): the lines cannot be edited there.
func (ls yamlLines) find(body ast.Node, path []string) (e, parent lineEntry, depth int, found, editable bool) {
	parent = lineEntry{start: -1, end: len(ls), indent: -1}
	n := body
	for i, key := range path {
		for {
			switch w := n.(type) {
			case *ast.AnchorNode:
				n = w.Value
				continue
			case *ast.TagNode:
				n = w.Value
				continue
			}
			break
		}
		var entries []*ast.MappingValueNode
		switch m := n.(type) {
		case nil, *ast.NullNode, *ast.CommentGroupNode:
			return e, parent, i, false, true
		case *ast.MappingNode:
			if m.IsFlowStyle {
				return e, parent, i, false, false
			}
			entries = m.Values
		case *ast.MappingValueNode:
			entries = []*ast.MappingValueNode{m}
		default:
			return e, parent, i, false, false
		}
		var mv *ast.MappingValueNode
		for _, c := range entries {
			if tk := c.Key.GetToken(); tk != nil && tk.Value == key {
				mv = c
				break
			}
		}
		if mv == nil {
			return e, parent, i, false, true
		}
		p := tokenPos(mv.Key.GetToken())
		if p.Line-1 <= parent.start || p.Line-1 >= parent.end {
			return e, parent, i, false, false
		}
		e = lineEntry{start: p.Line - 1, end: ls.entryEnd(p.Line-1, p.Col-1, parent.end), indent: p.Col - 1}
		if i == len(path)-1 {
			return e, parent, i + 1, true, true
		}
		parent, n = e, mv.Value
	}
	return e, parent, len(path), true, true
}

// entryEnd is where the entry whose key is at line start, column indent,
// ends: before the first line less indented (or as indented, but not a
// list item), at most to, without trailing blank or comment lines.
func (ls yamlLines) entryEnd(start, indent, to int) int {
	end := start + 1
	for end < to {
		l := ls[end]
		if !blankOrComment(l) && (indentOf(l) < indent || indentOf(l) == indent && !strings.HasPrefix(strings.TrimSpace(l), "- ")) {
			break
		}
		end++
	}
	for end > start+1 && blankOrComment(ls[end-1]) {
		end--
	}
	return end
}

// reindent shifts lines by d columns (d may be negative).
func reindent(lines []string, d int) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		switch {
		case d > 0 && l != "":
			out[i] = strings.Repeat(" ", d) + l
		case d < 0 && indentOf(l) >= -d:
			out[i] = l[-d:]
		default:
			out[i] = l
		}
	}
	return out
}

// mergeInto applies the settings at paths from body onto file, line by
// line; ok false where it cannot.
func mergeInto(file, body []byte, paths [][]string) (out []byte, ok bool) {
	bl := yamlLines(strings.Split(string(body), "\n"))
	bt, ok := parseBody(body)
	if !ok {
		return nil, false
	}
	for _, p := range paths {
		ft, ok := parseBody(file) // again after each edit: the lines moved
		if !ok {
			return nil, false
		}
		fl := yamlLines(strings.Split(string(file), "\n"))
		be, _, _, inBody, okB := bl.find(bt, p)
		fe, parent, depth, inFile, okF := fl.find(ft, p)
		if !okB || !okF {
			return nil, false
		}
		switch {
		case inFile && inBody:
			repl := reindent([]string(bl[be.start:be.end]), fe.indent-be.indent)
			fl = append(fl[:fe.start], append(repl, fl[fe.end:]...)...)
		case inFile:
			fl = append(fl[:fe.start], fl[fe.end:]...)
		case inBody:
			fl = fl.add(parent, p[depth:], bl[be.start:be.end], be.indent)
		}
		file = []byte(strings.Join(fl, "\n"))
	}
	return file, true
}

// add puts the keys of rest the file lacks at the end of parent (the
// deepest entry of the path it has): the missing mappings as bare keys,
// then the body's lines for the setting, indented under them.
func (fl yamlLines) add(parent lineEntry, rest []string, entry []string, entryIndent int) yamlLines {
	indent, at := 0, len(fl)
	if parent.start >= 0 {
		indent, at = parent.indent+2, parent.end
		for j := parent.start + 1; j < parent.end; j++ {
			if !blankOrComment(fl[j]) {
				indent = indentOf(fl[j])
				break
			}
		}
	} else {
		for at > 0 && strings.TrimSpace(fl[at-1]) == "" {
			at--
		}
	}
	var add []string
	for k, key := range rest[:len(rest)-1] {
		add = append(add, strings.Repeat(" ", indent+2*k)+key+":")
	}
	add = append(add, reindent(entry, indent+2*(len(rest)-1)-entryIndent)...)
	return append(fl[:at], append(add, fl[at:]...)...)
}
