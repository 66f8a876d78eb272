package config

import (
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"
)

// Bounds on one config file (#13). A config is a few kilobytes nested four
// or five levels deep. goccy/go-yaml's parser (not its scanner) costs far
// more than linear time and memory on deep nesting (200 KB of "[[[[" took
// 68 s and 15 GB) and on wide block mappings, so the parser only gets
// token streams within these bounds, counted on goccy's own tokens: no
// second reader of YAML that could disagree with the parser. The scanner
// is linear, at about 300 bytes per token, so the costliest refusal is
// MaxSize of "[" (every byte a token): 0.84 s and 309 MB; the widest block
// mapping MaxNodes lets through (about 5,000 keys, 70 KB) costs 0.26 s and
// 123 MB per parse (BenchmarkParseBombs, on a loaded 2-core machine).
const (
	// MaxSize is the largest config file or PUT /admin/config body, in bytes.
	MaxSize = 1 << 20
	// MaxDepth is how deeply lists and mappings may nest, counting the
	// top-level mapping as 1 and following aliases.
	MaxDepth = 32
	// MaxNodes is how many keys and values a file may hold (a real config
	// has a few hundred). The parser's cost grows with the square of a
	// mapping's size: 45,000 keys in one mapping took 106 s (#13 review).
	MaxNodes = 10000
)

// readFile reads at most MaxSize+1 bytes of the file at path, so that a huge
// file costs no more than that and Parse refuses it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxSize+1))
}

// checkBounds refuses data longer than MaxSize, and a token stream nested
// deeper than MaxDepth or holding more than MaxNodes keys and values, with
// the position of the first token past the bound. The tokens are goccy's
// own (quotes, comments, block scalars are read as the parser reads them);
// nesting is counted from flow brackets and from the columns of block
// entries ("- ", "? " and keys). Aliases are not followed here: the
// decoder bounds their expansion (maxNodes).
func checkBounds(data []byte) (token.Tokens, *posMsg) {
	if len(data) > MaxSize {
		return nil, &posMsg{Pos{1, 1}, fmt.Sprintf("config is larger than %d bytes (1 MiB)", MaxSize)}
	}
	tks := lexer.Tokenize(string(data))
	var indents []int // columns of the open block collections
	flow, nodes := 0, 0
	for i, tk := range tks {
		col := tk.Position.Column
		switch tk.Type {
		case token.CommentType, token.CollectEntryType, token.DocumentHeaderType, token.DocumentEndType, token.DirectiveType, token.SpaceType:
			continue
		case token.SequenceEndType, token.MappingEndType:
			flow = max(0, flow-1)
			continue
		case token.MappingValueType:
			if flow > 0 || i == 0 || tks[i-1].Position.Line != tk.Position.Line {
				continue
			}
			col = tks[i-1].Position.Column // the key's
		case token.SequenceEntryType, token.MappingKeyType:
		case token.SequenceStartType, token.MappingStartType:
			flow++
		}
		if tk.Type == token.MappingValueType || flow == 0 && (tk.Type == token.SequenceEntryType || tk.Type == token.MappingKeyType) {
			for len(indents) > 0 && indents[len(indents)-1] > col {
				indents = indents[:len(indents)-1]
			}
			if len(indents) == 0 || indents[len(indents)-1] < col {
				indents = append(indents, col)
			}
		}
		at := Pos{tk.Position.Line, col}
		if len(indents)+flow > MaxDepth {
			return nil, &posMsg{at, fmt.Sprintf("lists and mappings nested more than %d levels deep", MaxDepth)}
		}
		if tk.Type != token.MappingValueType && tk.Type != token.AnchorType && tk.Type != token.AliasType && tk.Type != token.TagType {
			if nodes++; nodes > MaxNodes {
				return nil, &posMsg{at, fmt.Sprintf("config holds more than %d keys and values", MaxNodes)}
			}
		}
	}
	return tks, nil
}

// posMsg is a message at a position, before the file name is known.
type posMsg struct {
	Pos
	msg string
}
