package config

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

var (
	prefixType = reflect.TypeFor[netip.Prefix]()
	secretType = reflect.TypeFor[Secret]()
	envType    = reflect.TypeFor[Env]()
)

// scalarParser is implemented by the config's own scalar types. tag is the
// YAML tag, or "" when the text came from ${VAR} expansion.
type scalarParser interface {
	parseScalar(s, tag string) error
}

// decode recurses as deep as the Config types go (a handful of levels), not
// as deep as the YAML: a collection where a scalar belongs is an error, and
// aliases are charged to the node budget. Errors are recorded and decoding
// goes on, so one pass finds every error of a file. path is "" only for
// the document, a struct (decodeMapping names it "the document"). It
// reports whether a value was written there and read without an error.
func (d *decoder) decode(an ast.Node, v reflect.Value, path string) bool {
	n := d.resolve(an)
	if n == nil {
		return false
	}
	l := d.locs[path]
	l.Pos = n.pos
	d.locs[path] = l
	if n.kind == scalarNode && n.tag == nullTag {
		v.SetZero() // "key:" or "key: null" means unset: the default applies
		return false
	}
	errs := len(d.errs)
	if !d.decodeOwn(n, v, path) {
		d.decodeKind(an, n, v, path)
	}
	return len(d.errs) == errs
}

func (d *decoder) decodeKind(an ast.Node, n *node, v reflect.Value, path string) {
	switch t := v.Type(); t.Kind() {
	case reflect.Pointer:
		e := reflect.New(t.Elem())
		d.decode(an, e.Elem(), path)
		v.Set(e)
	case reflect.Struct, reflect.Map:
		d.decodeMapping(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if s, _, ok := d.scalar(n, path); ok {
			v.SetString(s)
			if t == secretType {
				d.hidden[path] = n
			}
		}
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		d.decodeBasic(n, v, path)
	default:
		d.errAt(n.pos, "%s: unsupported type %s", path, t)
	}
}

// decodeOwn decodes the config's own scalar types (netip.Prefix,
// scalarParser implementations) from a scalar; false when v is none of
// them, or n is a collection (a StringList's list, or an error that
// decode by kind reports), and decode goes on by kind.
func (d *decoder) decodeOwn(n *node, v reflect.Value, path string) bool {
	t := v.Type()
	switch {
	case t == prefixType:
		if s, _, ok := d.scalar(n, path); ok {
			p, err := ParsePrefix(s)
			if err != nil {
				d.errAt(n.pos, "%s: %v", path, err)
				return true
			}
			v.Set(reflect.ValueOf(p))
		}
		return true
	case n.kind == scalarNode && v.CanAddr() && v.Addr().Type().Implements(reflect.TypeFor[scalarParser]()):
		if s, tag, ok := d.scalar(n, path); ok {
			if err := v.Addr().Interface().(scalarParser).parseScalar(s, tag); err != nil {
				d.errAt(n.pos, "%s: %v", path, err)
			}
		}
		return true
	}
	return false
}

func (d *decoder) decodeSlice(n *node, v reflect.Value, path string) {
	if n.kind != sequenceNode {
		d.errAt(n.pos, "%s: expected a list, got %s", path, kindName(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.content), len(n.content))
	for i, c := range n.content {
		d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

// basicKinds is, per Go kind, the YAML tags it takes ("" is text that
// came from ${VAR} expansion) and what the message calls it.
var basicKinds = map[reflect.Kind]struct {
	tags []string
	want string
}{
	reflect.Int:     {[]string{intTag, ""}, "an integer"},
	reflect.Int64:   {[]string{intTag, ""}, "an integer"},
	reflect.Float64: {[]string{intTag, floatTag, ""}, "a number"},
	reflect.Bool:    {[]string{boolTag, ""}, "true or false"},
}

func (d *decoder) decodeBasic(n *node, v reflect.Value, path string) {
	s, tag, ok := d.scalar(n, path)
	if !ok {
		return
	}
	bk := basicKinds[v.Kind()]
	if !slices.Contains(bk.tags, tag) {
		d.errAt(n.pos, "%s: expected %s, got %s", path, bk.want, kindName(n))
		return
	}
	text := strings.TrimSpace(s)
	switch v.Kind() {
	case reflect.Float64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || f != f || f > 1e300 || f < -1e300 {
			d.errAt(n.pos, "%s: invalid number %q", path, s)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			d.errAt(n.pos, "%s: expected true or false, got %q", path, s)
			return
		}
		v.SetBool(b)
	default:
		i, err := strconv.ParseInt(text, 0, 64)
		if err != nil || v.OverflowInt(i) {
			d.errAt(n.pos, "%s: invalid integer %q", path, s)
			return
		}
		v.SetInt(i)
	}
}
