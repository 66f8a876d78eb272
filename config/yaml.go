package config

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	goccy "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	goccyparser "github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// The file format rests on goccy/go-yaml v1.19.2, its tokens and AST the
// one document model: goccy scans and parses the file and places syntax
// errors and every node at a line and a column; checkBounds counts size,
// nesting and nodes on its tokens before its parser runs (bound.go says
// why); redaction, RedactedSource and ParseUpdate's REDACTED splice its
// tokens (Origin keeps each token's text as written, editTokens).
//
// Values are set by decode*.go, not by goccy's decoder: with Strict() it
// takes port: "3000" into an int, truncates port: 3000.7 to 3000 and stops
// at the first error (the docs promise every error of a file in one run,
// with "did you mean"), and on the widest mapping the bound lets through
// it takes 1.0 s and 113 MB where parsing and decoding here take 0.3 s and
// 124 MB. Strict scalars through its unmarshalers would need a wrapper
// type for every int and bool of Config. So the decoder reads each scalar with its YAML tag
// (Duration, ByteSize and URL through scalarParser: "15" without a unit
// is refused at its position), and records each value's position by YAML
// path for validation, the numbers written as 0 (refuseDefaultedZeros)
// and the scalar of each secret for redaction.

type nodeKind uint8

const (
	scalarNode nodeKind = iota + 1
	mappingNode
	sequenceNode
)

// node is how the decoder reads one node of goccy's AST (see view): made
// when the decoder reaches it, with aliases, anchors and tags read. Its
// position is that of its anchor or tag if it has one, else of its first
// character (the first key for a block mapping). Scalars carry their core
// tag ("!!str", "!!int", ...) or the tag written on them; a mapping's
// content alternates keys and values.
type node struct {
	kind    nodeKind
	tag     string
	value   string
	pos     Pos
	content []ast.Node
	// tk is a scalar's token in the document (see rewrite); nil for a
	// block scalar, whose text is not one token's.
	tk *token.Token
}

// parseYAML returns the single document's body; nil for an empty file or
// a null document. A syntax error stops the parse: it comes back as the
// only error, at its position. It links each alias to the anchor before
// it in document order (d.aliases), as YAML defines them.
func (d *decoder) parseYAML(tks token.Tokens) (ast.Node, error) {
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
	if len(docs) > 1 {
		return nil, ErrorList{d.errAt(docPos(docs[1]), "only one YAML document is allowed")}
	}
	if len(docs) == 0 || docs[0].Body == nil {
		return nil, nil
	}
	body := docs[0].Body
	d.first = firstToken(body)
	d.aliases = map[*ast.AliasNode]ast.Node{}
	anchors := map[string]ast.Node{}
	ast.Walk(visitor(func(n ast.Node) {
		switch n := n.(type) {
		case *ast.AnchorNode:
			anchors[nameOf(n.Name)] = n
		case *ast.AliasNode:
			if a, ok := anchors[nameOf(n.Value)]; ok {
				d.aliases[n] = a
			} else {
				d.errAt(astPos(n), "unknown anchor %q", nameOf(n.Value))
			}
		}
	}), body)
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	if r := d.view(body); r == nil || r.kind == scalarNode && r.tag == nullTag {
		return nil, nil
	}
	return body, nil
}

type visitor func(ast.Node)

func (v visitor) Visit(n ast.Node) ast.Visitor {
	if n != nil {
		v(n)
	}
	return v
}

func nameOf(n ast.Node) string {
	if n == nil || n.GetToken() == nil {
		return ""
	}
	return n.GetToken().Value
}

// view reads n, following aliases (a cycle of aliases alone is nil, as
// is a nil node); it does not charge the node budget (resolve does).
func (d *decoder) view(n ast.Node) *node {
	var out *node
	tag := ""
	for range maxNodes {
		switch w := n.(type) {
		case nil:
			return nil
		case *ast.AliasNode:
			n = d.aliases[w]
			continue
		}
		if out == nil {
			out = &node{pos: astPos(n)}
		}
		switch w := n.(type) {
		case *ast.AnchorNode:
			n = w.Value
		case *ast.MappingKeyNode: // "? key"
			n = w.Value
		case *ast.TagNode:
			if tag == "" {
				tag = w.Start.Value
			}
			n = w.Value
		case *ast.MappingNode:
			out.kind, out.tag = mappingNode, "!!map"
			for _, mv := range w.Values {
				out.content = append(out.content, mv.Key, mv.Value)
			}
			return out
		case *ast.MappingValueNode: // a mapping of one entry, in some contexts
			out.kind, out.tag, out.content = mappingNode, "!!map", []ast.Node{w.Key, w.Value}
			return out
		case *ast.SequenceNode:
			out.kind, out.tag, out.content = sequenceNode, "!!seq", w.Values
			return out
		default:
			return scalarView(out, w, tag)
		}
	}
	return nil
}

// scalarView fills out from the scalar n, written with tag if not "";
// its core tag comes from goccy's reading.
func scalarView(out *node, n ast.Node, tag string) *node {
	tk := n.GetToken()
	out.kind, out.tk = scalarNode, tk
	if tk != nil {
		out.value = tk.Value
	}
	switch n := n.(type) {
	case *ast.NullNode, *ast.CommentGroupNode:
		out.tag = nullTag
		if tk == nil || tk.Type == token.ImplicitNullType {
			out.value = ""
		}
	case *ast.StringNode:
		out.tag, out.value = strTag, n.Value
	case *ast.LiteralNode:
		out.tag, out.tk = strTag, nil
		if n.Value != nil {
			out.value = n.Value.Value
		}
	default: // a type of no core tag is refused by scalar as an unsupported tag
		out.tag = cmp.Or(coreTags[n.Type()], "!"+n.Type().String())
	}
	if tag != "" {
		out.tag, _ = strings.CutPrefix(tag, "tag:yaml.org,2002:")
		if out.tag != tag {
			out.tag = "!!" + out.tag
		}
	}
	return out
}

// coreTags is the core tag of each scalar node type that its type alone gives.
var coreTags = map[ast.NodeType]string{ast.BoolType: boolTag, ast.IntegerType: intTag, ast.FloatType: floatTag,
	ast.InfinityType: floatTag, ast.NanType: floatTag, ast.MergeKeyType: mergeTag}

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

// marshal writes v as YAML (see Config.Redacted).
func marshal(v any) ([]byte, error) {
	return goccy.MarshalWithOptions(v, goccy.Indent(4), goccy.IndentSequence(true), goccy.AutoInt())
}
