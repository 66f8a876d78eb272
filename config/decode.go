package config

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"reflect"
	"strconv"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// maxNodes bounds the work done on one file, including alias expansion, so
// that a "billion laughs" document cannot exhaust memory.
const maxNodes = 100_000

// maxErrors bounds the error list; past it one more error says so.
const maxErrors = 100

// Load reads, decodes and validates the file at path. On a problem in the
// file the error is an ErrorList; on a read failure it wraps the os error.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// LoadPartial is Load for commands that use part of a file: token mint
// needs the keys, not admin_token; healthcheck needs listen.admin. An
// environment variable that is not set expands to the empty string
// instead of failing the file, and is listed in unset, so a command whose
// part came out invalid can say which variable it lacks. The gateway
// itself always uses Load.
func LoadPartial(path string) (c *Config, unset []string, err error) {
	data, err := readFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	c, err = parse(path, data, func(name string) (string, bool) {
		v, ok := os.LookupEnv(name)
		if !ok {
			unset = append(unset, name)
		}
		return v, true
	})
	return c, unset, err
}

// Parse decodes and validates data, naming it name in errors. ${VAR} and
// ${VAR:-default} in scalar values expand from the environment. The result
// has defaults applied and Path set to name. Data larger than MaxSize or
// nested deeper than MaxDepth is refused before it is parsed.
//
// An invalid file gives an ErrorList of all its problems at once, in file
// order: unknown keys, wrong types and failed validation together. Only a
// YAML syntax error (or a bound) stops early: it is then the only error,
// since nothing after it can be read reliably.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, os.LookupEnv)
}

func parse(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	c, d, err := decodeOnly(name, data, lookup)
	if err != nil {
		return nil, err
	}
	// Validate even when decoding failed, so that one pass shows every
	// error of the file (#14). A value that failed to decode is left zero
	// and gets its default; a validation error at the same place as a
	// decode error is a consequence of it and is left out.
	decodeErrs := len(d.errs)
	c.ApplyDefaults()
	d.refuseDefaultedZeros()
	c.Path = name
	c.src = data
	c.expanded = d.expanded
	d.validate(c)
	d.errs = dropShadowed(d.errs, decodeErrs, d.unexpanded)
	if len(d.errs) > 0 {
		d.errs.sort()
		for _, e := range d.errs {
			e.Msg = unexpand(e.Msg, d.expanded, strconv.Quote)
		}
		return nil, d.errs
	}
	return c, nil
}

// dropShadowed removes from errs[n:] (validation) the errors placed where
// one of errs[:n] (decoding) is, or at a value in also (one whose ${VAR}
// failed: its error points inside it, at the variable).
func dropShadowed(errs ErrorList, n int, also map[Pos]bool) ErrorList {
	if n == 0 || n == len(errs) {
		return errs
	}
	at := maps.Clone(also) // never nil: decodeOnly makes it
	for _, e := range errs[:n] {
		at[Pos{e.Line, e.Col}] = true
	}
	out := errs[:n]
	for _, e := range errs[n:] {
		if !at[Pos{e.Line, e.Col}] {
			out = append(out, e)
		}
	}
	return out
}

// decodeOnly decodes data without defaults or validation. A syntax or
// bounds error comes back as err; decode errors are left in d.errs.
func decodeOnly(name string, data []byte, lookup func(string) (string, bool)) (*Config, *decoder, error) {
	d := &decoder{file: name, lookup: lookup, locs: map[string]loc{}, budget: maxNodes, hidden: map[string]*node{},
		reads: map[*token.Token]int{}, unexpanded: map[Pos]bool{}, expanded: map[string]string{}}
	tks, pm := checkBounds(data)
	if pm != nil {
		d.errAt(pm.Pos, "%s", pm.msg)
		return nil, nil, d.errs
	}
	root, err := d.parseYAML(tks)
	if err != nil {
		return nil, nil, err
	}
	c := &Config{}
	rv := reflect.ValueOf(c).Elem()
	if root == nil {
		d.locs[""] = loc{Pos: Pos{1, 1}}
	} else {
		d.decode(root, rv, "")
	}
	d.keepRaw(c)
	return c, d, nil
}

// decoder walks goccy's AST into Go values by their yaml tags,
// rejecting unknown keys and wrong types, and remembers where every value
// came from, by its YAML path ("templates.web.memory", "routes[1]"), so
// validation can point at it by the same path.
type decoder struct {
	file   string
	lookup func(string) (string, bool)
	errs   ErrorList
	budget int
	locs   map[string]loc // by path; "" is the document
	// hidden holds the scalar each secret and env value was decoded from,
	// by hiddenKey (see redact.go).
	hidden map[string]*node
	// reads counts how often each scalar token was read as a value or a
	// key: more reads than hidden places means an alias carried it to a
	// place where it shows (redact.go).
	reads map[*token.Token]int
	// aliases links each alias to its anchor (see parseYAML).
	aliases map[*ast.AliasNode]ast.Node
	// unexpanded holds the start of each value whose ${VAR} expansion
	// failed: validation errors there follow from it (see dropShadowed).
	unexpanded map[Pos]bool
	// first is the document's first token: from it, goccy's tokens give
	// back the text as written (see rewrite).
	first *token.Token
	// expanded maps each value ${VAR} expansion made to the text it was
	// made from, so that messages quote what the file says, never what
	// the environment holds (a secret, maybe: expose).
	expanded map[string]string
	// zeros are the numbers written as 0 (see refuseDefaultedZeros).
	zeros []writtenZero
}

// loc is where a value (and the key naming it) sits in the file.
type loc struct {
	Pos
	Key Pos // zero for list items and the root
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

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scalarKinds names a scalar by its tag in messages; any other is a string.
var scalarKinds = map[string]string{intTag: "an integer", floatTag: "a number", boolTag: "a boolean", nullTag: "null"}

func kindName(n *node) string {
	switch n.kind {
	case mappingNode:
		return "a mapping"
	case sequenceNode:
		return "a list"
	case scalarNode:
		return cmp.Or(scalarKinds[n.tag], "a string")
	}
	return "something else"
}

// resolve reads n (see view) and charges the node budget; nil when
// exhausted.
func (d *decoder) resolve(an ast.Node) *node {
	n := d.view(an)
	if n == nil {
		return nil
	}
	d.budget--
	if d.budget == 0 {
		d.errAt(n.pos, "document too large (more than %d values after alias expansion)", maxNodes)
	}
	if d.budget <= 0 {
		return nil
	}
	return n
}
