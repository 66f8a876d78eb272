package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	yaml "go.yaml.in/yaml/v3"
)

// maxNodes bounds the work done on one file, including alias expansion, so
// that a "billion laughs" document cannot exhaust memory.
const maxNodes = 100_000

// maxErrors bounds the error list; past it one more error says so.
const maxErrors = 100

// Load reads, decodes and validates the file at path. On a problem in the
// file the error is an ErrorList; on a read failure it wraps the os error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Validate loads the file at path and returns its problems, if any.
func Validate(path string) error {
	_, err := Load(path)
	return err
}

// Parse decodes and validates data, naming it name in errors. ${VAR} and
// ${VAR:-default} in scalar values expand from the environment. The result
// has defaults applied and Path set to name.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, os.LookupEnv)
}

func parse(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	d := &decoder{file: name, lookup: lookup, locs: map[addrKey]loc{}, budget: maxNodes}
	root, err := d.parseYAML(data)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	rv := reflect.ValueOf(c).Elem()
	if root == nil {
		d.locs[addrOf(rv)] = loc{Pos: Pos{1, 1}}
	} else {
		d.decode(root, rv, "")
	}
	if len(d.errs) == 0 {
		c.ApplyDefaults()
		c.Path = name
		d.validate(c)
	}
	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, d.errs
	}
	return c, nil
}

// parseYAML returns the single document's root node; nil for an empty file.
func (d *decoder) parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, ErrorList{d.syntaxError(data, err)}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, ErrorList{d.syntaxError(data, err)}
	default:
		at := &next
		if len(next.Content) > 0 {
			at = next.Content[0] // the document node's own position is unreliable
		}
		return nil, ErrorList{d.errAt(nodePos(at), "only one YAML document is allowed")}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == nullTag {
		return nil, nil
	}
	return root, nil
}

// syntaxError positions a YAML syntax error. go.yaml.in/yaml/v3 reports only
// a line, so the file is parsed again with goccy/go-yaml, whose errors carry
// line and column; its position and message are used when it fails too.
func (d *decoder) syntaxError(data []byte, err error) *Error {
	if p := goccyPos(data); p != nil {
		return p.withFile(d.file)
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.Index(rest, ": "); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, rest[i+2:]
			}
		}
	}
	return d.errAt(Pos{line, 1}, "invalid YAML: %s", msg)
}

type posMsg struct {
	Pos
	msg string
}

func (p *posMsg) withFile(f string) *Error {
	return &Error{File: f, Line: p.Line, Col: p.Col, Msg: "invalid YAML: " + p.msg}
}

func goccyPos(data []byte) (pm *posMsg) {
	defer func() {
		if recover() != nil { // never let a second parser's bug crash a reload
			pm = nil
		}
	}()
	_, err := goccyparser.ParseBytes(data, 0)
	var ye goccy.Error
	if err == nil || !errors.As(err, &ye) || ye.GetToken() == nil || ye.GetToken().Position == nil {
		return nil
	}
	p := ye.GetToken().Position
	if p.Line < 1 || p.Column < 1 {
		return nil
	}
	return &posMsg{Pos{p.Line, p.Column}, ye.GetMessage()}
}

// decoder walks a yaml.Node tree into Go values by their yaml tags,
// rejecting unknown keys and wrong types, and remembers where every value
// came from so validation can point at it.
type decoder struct {
	file   string
	lookup func(string) (string, bool)
	errs   ErrorList
	budget int
	locs   map[addrKey]loc
}

// addrKey identifies a decoded Go value. The type is part of the key
// because a struct and its first field share an address.
type addrKey struct {
	p unsafe.Pointer
	t reflect.Type
}

// loc is where a value (and the key naming it) sits in the file.
type loc struct {
	Pos
	Key  Pos // zero for list items and the root
	path string
}

func addrOf(v reflect.Value) addrKey {
	return addrKey{v.Addr().UnsafePointer(), v.Type()}
}

// locOf returns the location recorded for the value ptr points to.
func (d *decoder) locOf(ptr any) (loc, bool) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return loc{}, false
	}
	l, ok := d.locs[addrKey{v.UnsafePointer(), v.Type().Elem()}]
	return l, ok
}

func (d *decoder) errAt(p Pos, format string, args ...any) *Error {
	e := &Error{File: d.file, Line: p.Line, Col: p.Col, Msg: fmt.Sprintf(format, args...)}
	switch {
	case len(d.errs) < maxErrors:
		d.errs = append(d.errs, e)
	case len(d.errs) == maxErrors:
		d.errs = append(d.errs, &Error{File: d.file, Line: p.Line, Col: p.Col, Msg: "too many errors"})
	}
	return e
}

func nodePos(n *yaml.Node) Pos { return Pos{n.Line, n.Column} }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case intTag:
			return "an integer"
		case floatTag:
			return "a number"
		case boolTag:
			return "a boolean"
		case nullTag:
			return "null"
		}
		return "a string"
	}
	return "something else"
}

// resolve follows aliases and charges the node budget; nil when exhausted.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return nil
	}
	d.budget--
	if d.budget == 0 {
		d.errAt(nodePos(n), "document too large (more than %d values after alias expansion)", maxNodes)
	}
	if d.budget <= 0 {
		return nil
	}
	return n
}

var (
	prefixType     = reflect.TypeFor[netip.Prefix]()
	stringListType = reflect.TypeFor[StringList]()
)

// scalarParser is implemented by the config's own scalar types. tag is the
// YAML tag, or "" when the text came from ${VAR} expansion.
type scalarParser interface {
	parseScalar(s, tag string) error
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n = d.resolve(n); n == nil {
		return
	}
	if v.CanAddr() {
		k := addrOf(v)
		l := d.locs[k]
		l.Pos, l.path = nodePos(n), path
		d.locs[k] = l
	}
	name := path
	if name == "" {
		name = "the document"
	}
	t := v.Type()
	if n.Kind == yaml.ScalarNode && n.ShortTag() == nullTag {
		v.SetZero() // "key:" or "key: null" means unset: the default applies
		return
	}
	switch {
	case t == prefixType:
		if s, _, ok := d.scalar(n, path); ok {
			p, err := ParsePrefix(s)
			if err != nil {
				d.errAt(nodePos(n), "%s: %v", name, err)
				return
			}
			v.Set(reflect.ValueOf(p))
		}
		return
	case t == stringListType:
		if n.Kind == yaml.ScalarNode {
			if s, _, ok := d.scalar(n, path); ok {
				v.Set(reflect.ValueOf(StringList{s}))
			}
			return
		}
	case v.CanAddr() && v.Addr().Type().Implements(reflect.TypeFor[scalarParser]()):
		if s, tag, ok := d.scalar(n, path); ok {
			if err := v.Addr().Interface().(scalarParser).parseScalar(s, tag); err != nil {
				d.errAt(nodePos(n), "%s: %v", name, err)
			}
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		e := reflect.New(t.Elem())
		d.decode(n, e.Elem(), path)
		v.Set(e)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errAt(nodePos(n), "%s: expected a list, got %s", name, kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.String:
		if s, _, ok := d.scalar(n, path); ok {
			v.SetString(s)
		}
	case reflect.Int, reflect.Int64:
		s, tag, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if tag != intTag && tag != "" {
			d.errAt(nodePos(n), "%s: expected an integer, got %s", name, kindName(n))
			return
		}
		i, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
		if err != nil || v.OverflowInt(i) {
			d.errAt(nodePos(n), "%s: invalid integer %q", name, s)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		s, tag, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if tag != intTag && tag != floatTag && tag != "" {
			d.errAt(nodePos(n), "%s: expected a number, got %s", name, kindName(n))
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f != f || f > 1e300 || f < -1e300 {
			d.errAt(nodePos(n), "%s: invalid number %q", name, s)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		s, tag, ok := d.scalar(n, path)
		if !ok {
			return
		}
		if tag != boolTag && tag != "" {
			d.errAt(nodePos(n), "%s: expected true or false, got %s", name, kindName(n))
			return
		}
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			d.errAt(nodePos(n), "%s: expected true or false, got %q", name, s)
			return
		}
		v.SetBool(b)
	default:
		d.errAt(nodePos(n), "%s: unsupported type %s", name, t)
	}
}

// scalar returns n's value with ${VAR} expanded, and its YAML tag ("" when
// expansion changed the text, so the target type decides how to read it).
func (d *decoder) scalar(n *yaml.Node, path string) (string, string, bool) {
	if n.Kind != yaml.ScalarNode {
		want := "a value"
		if path != "" {
			want = "a single value"
		}
		d.errAt(nodePos(n), "%s: expected %s, got %s", path, want, kindName(n))
		return "", "", false
	}
	tag := n.ShortTag()
	switch tag {
	case strTag, intTag, floatTag, boolTag, nullTag, tsTag:
	default:
		d.errAt(nodePos(n), "%s: unsupported YAML tag %s", path, n.Tag)
		return "", "", false
	}
	if !strings.Contains(n.Value, "$") {
		return n.Value, tag, true
	}
	s, off, err := expand(n.Value, d.lookup)
	if err != nil {
		d.errAt(exprPos(n, off), "%s: %v", path, err)
		return "", "", false
	}
	if s != n.Value {
		tag = ""
	}
	return s, tag, true
}

// exprPos is the position of byte off of n's value in the file: exact for
// plain and simple quoted single-line scalars, else the scalar's start.
func exprPos(n *yaml.Node, off int) Pos {
	p := nodePos(n)
	if strings.ContainsAny(n.Value, "\n\\'\"") {
		return p
	}
	switch n.Style {
	case 0:
		p.Col += off
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		p.Col += off + 1
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

// entry is one key/value pair of a mapping after merge keys are applied.
type entry struct{ k, v *yaml.Node }

// entries lists n's pairs, expanding "<<" merge keys; explicit keys win over
// merged ones. Duplicate explicit keys are errors.
func (d *decoder) entries(n *yaml.Node, path string, depth int) []entry {
	var own, merged []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == mergeTag {
			merged = append(merged, d.mergeSources(v, path, depth)...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.errAt(nodePos(k), "%s: keys must be strings", path)
			continue
		}
		if seen[k.Value] {
			d.errAt(nodePos(k), "%s: duplicate key %q", path, k.Value)
			continue
		}
		seen[k.Value] = true
		own = append(own, entry{k, v})
	}
	for _, e := range merged {
		if !seen[e.k.Value] {
			seen[e.k.Value] = true
			own = append(own, e)
		}
	}
	return own
}

func (d *decoder) mergeSources(v *yaml.Node, path string, depth int) []entry {
	if v = d.resolve(v); v == nil {
		return nil
	}
	if depth > 10 {
		d.errAt(nodePos(v), "%s: merge keys nested too deeply", path)
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		return d.entries(v, path, depth+1)
	case yaml.SequenceNode:
		var out []entry
		for _, c := range v.Content {
			if c = d.resolve(c); c == nil {
				return out
			}
			if c.Kind != yaml.MappingNode {
				d.errAt(nodePos(c), "%s: << needs a mapping or a list of mappings", path)
				continue
			}
			out = append(out, d.entries(c, path, depth+1)...)
		}
		return out
	}
	d.errAt(nodePos(v), "%s: << needs a mapping or a list of mappings", path)
	return nil
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		name := path
		if name == "" {
			name = "the document"
		}
		d.errAt(nodePos(n), "%s: expected a mapping, got %s", name, kindName(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, e := range d.entries(n, path, 0) {
		idx, ok := fields[e.k.Value]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", e.k.Value)
			if path != "" {
				msg = fmt.Sprintf("%s: unknown key %q", path, e.k.Value)
			}
			if s := suggest(e.k.Value, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.errAt(nodePos(e.k), "%s", msg)
			continue
		}
		f := v.FieldByIndex(idx)
		k := addrOf(f)
		l := d.locs[k]
		l.Key = nodePos(e.k)
		d.locs[k] = l
		d.decode(e.v, f, join(path, e.k.Value))
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errAt(nodePos(n), "%s: expected a mapping, got %s", path, kindName(n))
		return
	}
	t := v.Type()
	m := reflect.MakeMap(t)
	for _, e := range d.entries(n, path, 0) {
		key := e.k.Value
		p := join(path, key)
		ev := reflect.New(t.Elem()).Elem()
		if t.Elem().Kind() == reflect.Pointer {
			// Allocate here so that "name:" (null) still yields an entry and
			// the pointee's address can carry the key's position.
			ev.Set(reflect.New(t.Elem().Elem()))
			target := ev.Elem()
			d.locs[addrOf(target)] = loc{Pos: nodePos(e.v), Key: nodePos(e.k), path: p}
			if r := d.resolve(e.v); r != nil && !(r.Kind == yaml.ScalarNode && r.ShortTag() == nullTag) {
				d.decode(r, target, p)
				l := d.locs[addrOf(target)]
				l.Key = nodePos(e.k)
				d.locs[addrOf(target)] = l
			}
		} else {
			d.decode(e.v, ev, p)
		}
		m.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), ev)
	}
	v.Set(m)
}

var fieldCache = map[reflect.Type]map[string][]int{}

// fieldsOf maps yaml keys to field index paths, flattening ",inline" fields.
// The config types are fixed, so the cache is filled on first use per type;
// it is guarded by being built only from init-time-known types (see init).
func fieldsOf(t reflect.Type) map[string][]int {
	if f, ok := fieldCache[t]; ok {
		return f
	}
	return buildFields(t)
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

func init() {
	// Fill the field cache once so concurrent Parse calls only read it.
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == prefixType {
			return
		}
		if _, ok := fieldCache[t]; ok {
			return
		}
		fieldCache[t] = buildFields(t)
		for i := range t.NumField() {
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[Config]())
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
