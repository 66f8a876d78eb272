package config

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"
)

// entry is one key/value pair of a mapping after merge keys are applied.
type entry struct {
	k *node
	v ast.Node
}

// entries lists n's pairs, expanding "<<" merge keys; explicit keys win over
// merged ones. Duplicate explicit keys are errors.
func (d *decoder) entries(n *node, path string, depth int) []entry {
	var own, merged []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.content); i += 2 {
		k, v := d.view(n.content[i]), n.content[i+1]
		if k == nil {
			continue
		}
		if k.kind == scalarNode && k.tag == mergeTag {
			merged = append(merged, d.mergeSources(v, path, depth)...)
			continue
		}
		if k.kind != scalarNode {
			d.errAt(k.pos, "%s: keys must be strings", path)
			continue
		}
		if seen[k.value] {
			d.errAt(k.pos, "%s: duplicate key %q", path, k.value)
			continue
		}
		seen[k.value] = true
		own = append(own, entry{k, v})
	}
	for _, e := range merged {
		if !seen[e.k.value] {
			seen[e.k.value] = true
			own = append(own, e)
		}
	}
	return own
}

func (d *decoder) mergeSources(an ast.Node, path string, depth int) []entry {
	v := d.resolve(an)
	if v == nil {
		return nil
	}
	if depth > 10 {
		d.errAt(v.pos, "%s: merge keys nested too deeply", path)
		return nil
	}
	switch v.kind {
	case mappingNode:
		return d.entries(v, path, depth+1)
	case sequenceNode:
		var out []entry
		for _, ac := range v.content {
			c := d.resolve(ac)
			if c == nil {
				return out
			}
			if c.kind != mappingNode {
				d.errAt(c.pos, "%s: << needs a mapping or a list of mappings", path)
				continue
			}
			out = append(out, d.entries(c, path, depth+1)...)
		}
		return out
	}
	d.errAt(v.pos, "%s: << needs a mapping or a list of mappings", path)
	return nil
}

func (d *decoder) decodeStruct(n *node, v reflect.Value, path string) {
	if n.kind != mappingNode {
		name := path
		if name == "" {
			name = "the document"
		}
		d.errAt(n.pos, "%s: expected a mapping, got %s", name, kindName(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, e := range d.entries(n, path, 0) {
		idx, ok := fields[e.k.value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", e.k.value)
			if path != "" {
				msg = fmt.Sprintf("%s: unknown key %q", path, e.k.value)
			}
			if s := suggest(e.k.value, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.errAt(e.k.pos, "%s", msg)
			continue
		}
		p := join(path, e.k.value)
		l := d.locs[p]
		l.Key = e.k.pos
		d.locs[p] = l
		d.decode(e.v, v.FieldByIndex(idx), p)
	}
}

func (d *decoder) decodeMap(n *node, v reflect.Value, path string) {
	if n.kind != mappingNode {
		d.errAt(n.pos, "%s: expected a mapping, got %s", path, kindName(n))
		return
	}
	t := v.Type()
	m := reflect.MakeMap(t)
	for _, e := range d.entries(n, path, 0) {
		key := e.k.value
		p := join(path, key)
		ev := reflect.New(t.Elem()).Elem()
		if t.Elem().Kind() == reflect.Pointer {
			// Allocate here so that "name:" (null) still yields an entry.
			ev.Set(reflect.New(t.Elem().Elem()))
			d.locs[p] = loc{Pos: astPos(e.v), Key: e.k.pos, path: p}
			if r := d.resolve(e.v); r != nil && !(r.kind == scalarNode && r.tag == nullTag) {
				d.decode(e.v, ev.Elem(), p)
			}
		} else {
			d.decode(e.v, ev, p)
			if t == envType {
				if r := d.view(e.v); r != nil && r.kind == scalarNode {
					d.hidden[envKey(path, key)] = r
				}
			}
		}
		m.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), ev)
	}
	v.Set(m)
}

// fieldCache maps each config struct type to its fields by yaml key.
var fieldCache sync.Map // reflect.Type -> map[string][]int

// fieldsOf maps yaml keys to field index paths, flattening ",inline" fields.
func fieldsOf(t reflect.Type) map[string][]int {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string][]int)
	}
	f := buildFields(t)
	fieldCache.Store(t, f)
	return f
}

func buildFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if opts == "inline" {
			for k, idx := range buildFields(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = []int{i}
	}
	return out
}

// suggest returns the known key closest to k if it is a likely typo.
func suggest(k string, fields map[string][]int) string {
	best, bestD := "", 3
	for f := range fields {
		if dist := editDistance(k, f); dist < bestD || dist == bestD && f < best {
			best, bestD = f, dist
		}
	}
	if bestD > 2 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
