package config

import (
	"errors"
	"fmt"
	"strings"

	goccy "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	goccyparser "github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// This file parses a file with the YAML library (goccy/go-yaml) into the
// small node tree the decoder walks; each scalar keeps its goccy token, so
// the edits of the file (rewrite, RedactedSource, mergeInto) work on the
// same parse. goccy places syntax errors and every node at a line and a
// column; checkBounds has already bounded the input's size, nesting and
// node count, which is what keeps goccy's parser in check: on v1.19.2 it
// is quadratic in a block mapping's size (10,000 keys 2.7 s, 45,000 keys
// 25 s) and superlinear in flow nesting (20,000 levels 2.3 s).
//
// Values are decoded by decode*.go, not by goccy's decoder: measured on
// v1.19.2 with Strict(), it takes port: "3000" into an int, truncates
// port: 3000.7 to 3000, stops at the first type error (the docs promise
// every error of a file in one run), and took 41 s on a 45,000-key
// mapping. Its custom unmarshalers would make the scalars strict only by
// changing every int and bool of the Config types to a wrapper type; the
// config's own scalar types (Duration, ByteSize, URL) decode through
// scalarParser instead, with the YAML tag, so "15" without a unit or a
// quoted integer is refused with its position.

type nodeKind uint8

const (
	scalarNode nodeKind = iota + 1
	mappingNode
	sequenceNode
	aliasNode
)

// scalarStyle is how a scalar was written, for placing errors inside it.
type scalarStyle uint8

const (
	plainStyle scalarStyle = iota
	singleQuotedStyle
	doubleQuotedStyle
	blockStyle
)

// node is one YAML node. Its position is that of its anchor or tag if it
// has one, else of its first character (the first key for a block
// mapping). Scalars carry their core tag ("!!str", "!!int", ...) or the
// tag written on them; a mapping's content alternates keys and values.
type node struct {
	kind    nodeKind
	tag     string
	value   string
	style   scalarStyle
	pos     Pos
	content []*node
	alias   *node        // aliasNode: the anchored node, nil if unknown
	tk      *token.Token // scalarNode: its token in the document (see rewrite)
}

// ShortTag mirrors yaml.Node.ShortTag for the decoder.
func (n *node) ShortTag() string { return n.tag }

// parseYAML returns the single document's root node; nil for an empty file
// or a null document. A syntax error stops the parse: it comes back as the
// only error, at its position.
func (d *decoder) parseYAML(tks token.Tokens) (*node, error) {
	f, err := goccyParse(tks)
	if err != nil {
		return nil, ErrorList{d.syntaxError(err)}
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && (doc.Body != nil || doc.Start != nil) {
			docs = append(docs, doc)
		}
	}
	if len(docs) == 0 || docs[0].Body == nil {
		if len(docs) > 1 {
			return nil, ErrorList{d.errAt(docPos(docs[1]), "only one YAML document is allowed")}
		}
		return nil, nil
	}
	if len(docs) > 1 {
		return nil, ErrorList{d.errAt(docPos(docs[1]), "only one YAML document is allowed")}
	}
	d.first = firstToken(docs[0].Body)
	c := converter{d: d, anchors: map[string]*node{}}
	root := c.convert(docs[0].Body)
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	if root == nil || root.kind == scalarNode && root.tag == nullTag {
		return nil, nil
	}
	return root, nil
}

// goccyParse runs the parser, turning a panic (a parser bug) into an error
// so a bad file can never crash a reload.
func goccyParse(tks token.Tokens) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this file (%v)", r)
		}
	}()
	// Duplicate keys are the decoder's to report, with the others.
	return goccyparser.Parse(tks, 0, goccyparser.AllowDuplicateMapKey())
}

// syntaxError places a parse error at goccy's position, 1:1 if it has none.
func (d *decoder) syntaxError(err error) *Error {
	p, msg := Pos{1, 1}, err.Error()
	var ye goccy.Error
	if errors.As(err, &ye) {
		msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > 0 && tk.Position.Column > 0 {
			p = Pos{tk.Position.Line, tk.Position.Column}
		}
	}
	return d.errAt(p, "invalid YAML: %s", msg)
}

// firstToken is the first token of the file n is in: goccy links all of
// a file's tokens, and each keeps its text as written (Origin).
func firstToken(n ast.Node) *token.Token {
	tk := n.GetToken()
	for tk != nil && tk.Prev != nil {
		tk = tk.Prev
	}
	return tk
}

func docPos(doc *ast.DocumentNode) Pos {
	if doc.Body != nil {
		return astPos(doc.Body)
	}
	return tokenPos(doc.Start)
}

func tokenPos(tk *token.Token) Pos {
	if tk == nil || tk.Position == nil || tk.Position.Line < 1 || tk.Position.Column < 1 {
		return Pos{1, 1}
	}
	return Pos{tk.Position.Line, tk.Position.Column}
}

// astPos is where a node starts: a block mapping's token is the ':' of its
// first entry, so it is placed at that entry's key instead.
func astPos(n ast.Node) Pos {
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 {
		return astPos(m.Values[0].Key)
	}
	if mv, ok := n.(*ast.MappingValueNode); ok {
		return astPos(mv.Key)
	}
	return tokenPos(n.GetToken())
}

// converter turns goccy's AST into nodes. Anchors are recorded in document
// order before their node's children, as YAML defines them; an alias
// points at the anchored node (no expansion, so converting is linear).
type converter struct {
	d       *decoder
	anchors map[string]*node
}

func (c *converter) convert(n ast.Node) *node {
	switch n := n.(type) {
	case nil:
		return nil
	case *ast.AnchorNode:
		return c.anchor(n)
	case *ast.AliasNode:
		name := ""
		if n.Value != nil {
			name = n.Value.GetToken().Value
		}
		out := &node{kind: aliasNode, pos: astPos(n), alias: c.anchors[name]}
		if out.alias == nil {
			c.d.errAt(out.pos, "unknown anchor %q", name)
		}
		return out
	case *ast.TagNode:
		return c.tagged(n)
	case *ast.MappingNode:
		out := &node{kind: mappingNode, tag: "!!map", pos: astPos(n)}
		for _, mv := range n.Values {
			out.content = append(out.content, c.convert(mv.Key), c.convertValue(mv.Value, mv))
		}
		return out
	case *ast.MappingValueNode: // a mapping of one entry, in some contexts
		return &node{kind: mappingNode, tag: "!!map", pos: astPos(n),
			content: []*node{c.convert(n.Key), c.convertValue(n.Value, n)}}
	case *ast.MappingKeyNode: // "? key"
		return c.convert(n.Value)
	case *ast.SequenceNode:
		out := &node{kind: sequenceNode, tag: "!!seq", pos: astPos(n)}
		for _, v := range n.Values {
			out.content = append(out.content, c.convertValue(v, n))
		}
		return out
	case *ast.CommentGroupNode:
		return nil
	}
	return c.scalar(n)
}

// convertValue is convert for a value that must exist: an empty one is null.
func (c *converter) convertValue(n, parent ast.Node) *node {
	if out := c.convert(n); out != nil {
		return out
	}
	return &node{kind: scalarNode, tag: nullTag, pos: astPos(parent)}
}

func (c *converter) anchor(n *ast.AnchorNode) *node {
	name := ""
	if n.Name != nil {
		name = n.Name.GetToken().Value
	}
	// Register a placeholder first so that an alias inside the anchored
	// node refers to it (a cycle the decoder's node budget bounds).
	out := &node{pos: astPos(n)}
	c.anchors[name] = out
	inner := c.convertValue(n.Value, n)
	p := out.pos
	*out = *inner
	out.pos = p
	return out
}

func (c *converter) tagged(n *ast.TagNode) *node {
	out := c.convertValue(n.Value, n)
	cp := *out
	cp.pos = astPos(n)
	tag := n.Start.Value
	if rest, ok := strings.CutPrefix(tag, "tag:yaml.org,2002:"); ok {
		tag = "!!" + rest
	}
	if cp.kind == scalarNode {
		cp.tag = tag
		if tag == strTag && out.tag == nullTag && n.Value == nil {
			cp.value = ""
		}
	}
	return &cp
}

// scalar converts a scalar node; its core tag comes from goccy's reading.
func (c *converter) scalar(n ast.Node) *node {
	tk := n.GetToken()
	out := &node{kind: scalarNode, pos: astPos(n), tk: tk}
	if tk != nil {
		out.value = tk.Value
		switch tk.Type {
		case token.SingleQuoteType:
			out.style = singleQuotedStyle
		case token.DoubleQuoteType:
			out.style = doubleQuotedStyle
		}
	}
	switch n := n.(type) {
	case *ast.NullNode:
		out.tag = nullTag
		if tk != nil && tk.Type == token.ImplicitNullType {
			out.value = ""
		}
	case *ast.BoolNode:
		out.tag = boolTag
	case *ast.IntegerNode:
		out.tag = intTag
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		out.tag = floatTag
	case *ast.MergeKeyNode:
		out.tag = mergeTag
	case *ast.StringNode:
		out.tag, out.value = strTag, n.Value
	case *ast.LiteralNode:
		out.tag, out.style = strTag, blockStyle
		if n.Value != nil {
			out.value = n.Value.Value
		}
	default:
		c.d.errAt(out.pos, "unsupported YAML node %s", n.Type())
		return &node{kind: scalarNode, tag: nullTag, pos: out.pos}
	}
	return out
}

// marshal writes v as YAML (see Config.Redacted).
func marshal(v any) ([]byte, error) {
	return goccy.MarshalWithOptions(v, goccy.Indent(4), goccy.IndentSequence(true), goccy.AutoInt())
}
