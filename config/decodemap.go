package config

import (
	"cmp"
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
		if k.tk != nil {
			d.reads[k.tk]++
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

// decodeMapping decodes a mapping into a struct, by its fields' yaml keys
// (an unknown key is an error, with the closest known one), or into a map.
// A map entry written "name:" (null) is still an entry: a nil template,
// which ApplyDefaults fills.
func (d *decoder) decodeMapping(n *node, v reflect.Value, path string) {
	if n.kind != mappingNode {
		d.errAt(n.pos, "%s: expected a mapping, got %s", cmp.Or(path, "the document"), kindName(n))
		return
	}
	var fields map[string]field
	if v.Kind() == reflect.Struct {
		fields = fieldsOf(v.Type())
	} else {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, e := range d.entries(n, path, 0) {
		key, p := e.k.value, join(path, e.k.value)
		if fields == nil {
			d.locs[p] = loc{Key: e.k.pos}
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(e.v, ev, p)
			v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), ev)
			if v.Type() == envType {
				if r := d.view(e.v); r != nil && r.kind == scalarNode {
					d.hidden[envKey(path, key)] = r
				}
			}
			continue
		}
		f, ok := fields[key]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", key)
			if path != "" {
				msg = fmt.Sprintf("%s: unknown key %q", path, key)
			}
			if s := suggest(key, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.errAt(e.k.pos, "%s", msg)
			continue
		}
		d.locs[p] = loc{Key: e.k.pos}
		fv := v.FieldByIndex(f.index)
		if d.decode(e.v, fv, p) && (fv.CanInt() || fv.CanFloat()) && fv.IsZero() && !f.zeroIsDefault {
			d.zeros = append(d.zeros, writtenZero{p, fv})
		}
	}
}

// field is a struct field by its yaml key.
type field struct {
	index []int // in the struct, through ",inline" fields
	// zeroIsDefault (tag `zero:"default"`): a written 0 means the
	// default, as leaving the key out does. Elsewhere a 0 the defaults
	// replace is refused (refuseDefaultedZeros).
	zeroIsDefault bool
}

var fieldCache sync.Map // reflect.Type -> map[string]field

// fieldsOf maps yaml keys to fields, flattening ",inline" fields.
func fieldsOf(t reflect.Type) map[string]field {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]field)
	}
	f := buildFields(t)
	fieldCache.Store(t, f)
	return f
}

func buildFields(t reflect.Type) map[string]field {
	out := map[string]field{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if opts == "inline" {
			for k, in := range buildFields(f.Type) {
				in.index = append([]int{i}, in.index...)
				out[k] = in
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = field{index: []int{i}, zeroIsDefault: f.Tag.Get("zero") == "default"}
	}
	return out
}

// suggest returns the known key closest to k if it is a likely typo.
func suggest(k string, fields map[string]field) string {
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
