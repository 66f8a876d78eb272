package config

import (
	"strings"
)

// A PUT whose body is not an edit of the file (a script that sends the
// effective config, comments gone) is applied to the file key by key, as a
// person would: each changed setting's entry is replaced, added under its
// parent or removed, and every other line (comments, order, layout) stays
// (#24, 2). Only block-style mappings are edited; where an entry cannot be
// found that way (a flow mapping on the path), or where the result would
// not read as the body does, the body is written as sent.

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

// find locates the entry of path in lines[from:to] (children of a block
// mapping); ok false if a key on the path is missing, or a value on the
// way is not a block mapping. depth is how many keys of path were found
// (the last found entry is parent).
func (ls yamlLines) find(path []string) (e lineEntry, parent lineEntry, depth int, ok bool) {
	parent = lineEntry{start: -1, end: len(ls), indent: -1}
	from, to := 0, len(ls)
	for i, key := range path {
		child := -1
		for j := from; j < to; j++ {
			if !blankOrComment(ls[j]) {
				child = indentOf(ls[j])
				break
			}
		}
		if child <= parent.indent {
			return lineEntry{}, parent, i, false
		}
		found := -1
		for j := from; j < to; j++ {
			if blankOrComment(ls[j]) || indentOf(ls[j]) != child {
				continue
			}
			t := strings.TrimSpace(ls[j])
			for _, k := range []string{key, `"` + key + `"`, `'` + key + `'`} {
				if rest, cut := strings.CutPrefix(t, k+":"); cut && (rest == "" || rest[0] == ' ') {
					found = j
				}
			}
			if found >= 0 {
				break
			}
		}
		if found < 0 {
			return lineEntry{}, parent, i, false
		}
		end := found + 1
		for end < to {
			l := ls[end]
			if !blankOrComment(l) && (indentOf(l) < child || indentOf(l) == child && !strings.HasPrefix(strings.TrimSpace(l), "- ")) {
				break
			}
			end++
		}
		for end > found+1 && blankOrComment(ls[end-1]) {
			end--
		}
		e = lineEntry{start: found, end: end, indent: child}
		if i == len(path)-1 {
			return e, parent, i + 1, true
		}
		parent = e
		from, to = found+1, end
	}
	return e, parent, len(path), true
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
	fl := yamlLines(strings.Split(string(file), "\n"))
	bl := yamlLines(strings.Split(string(body), "\n"))
	for _, p := range paths {
		be, _, _, inBody := bl.find(p)
		fe, parent, depth, inFile := fl.find(p)
		switch {
		case inFile && inBody:
			repl := reindent([]string(bl[be.start:be.end]), fe.indent-be.indent)
			fl = append(fl[:fe.start], append(repl, fl[fe.end:]...)...)
		case inFile:
			fl = append(fl[:fe.start], fl[fe.end:]...)
		case inBody:
			// Add the keys the file lacks at the end of the deepest
			// parent it has: the missing mappings as bare keys, then the
			// body's entry for the setting itself.
			indent := 0
			if parent.start >= 0 {
				indent = parent.indent + 2
				for j := parent.start + 1; j < parent.end; j++ {
					if !blankOrComment(fl[j]) {
						indent = indentOf(fl[j])
						break
					}
				}
				if strings.TrimSpace(strings.SplitN(fl[parent.start], ":", 2)[1]) != "" &&
					!strings.HasPrefix(strings.TrimSpace(strings.SplitN(fl[parent.start], ":", 2)[1]), "#") {
					return nil, false // the parent's value is inline (a flow mapping)
				}
			}
			var add []string
			for k, key := range p[depth : len(p)-1] {
				add = append(add, strings.Repeat(" ", indent+2*k)+key+":")
			}
			add = append(add, reindent([]string(bl[be.start:be.end]), indent+2*(len(p)-1-depth)-be.indent)...)
			at := parent.end
			if parent.start < 0 {
				at = len(fl)
				for at > 0 && strings.TrimSpace(fl[at-1]) == "" {
					at--
				}
			}
			fl = append(fl[:at], append(add, fl[at:]...)...)
		}
	}
	return []byte(strings.Join(fl, "\n")), true
}
