package config

import (
	"fmt"
	"io"
	"os"
)

// Bounds on one config file (#13). A config is a few kilobytes nested four
// or five levels deep; the YAML parser costs far more than linear time and
// memory on deep nesting (200 KB of "[[[[" took 68 s and 15 GB in
// goccy/go-yaml), so input past these bounds is refused before the parser
// sees it. Within them the worst case is the widest block mapping MaxNodes
// lets through (about 5,000 keys, 70 KB): 0.64 s and 123 MB per parse,
// measured by BenchmarkParseBombs/widest-accepted-mapping on a loaded
// 2-core machine; a 1 MiB flow list of numbers costs about 250 bytes of
// memory per byte of input.
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

// checkBounds refuses data longer than MaxSize, nested deeper than
// MaxDepth or holding more than MaxNodes keys and values, in one pass without allocating beyond a MaxDepth-long stack.
//
// It reads just enough YAML to tell structure from text: quoted scalars,
// comments, plain scalars (and their continuation lines), block scalars,
// flow brackets and block indentation. Where it cannot tell, it counts
// less, never more, so a valid config is never refused for nesting it does
// not have; the decoder then checks the real depth on the parsed tree
// (decoder.decode). This scan is what refuses a nesting bomb in linear
// time, with a position.
func checkBounds(data []byte) *posMsg {
	if len(data) > MaxSize {
		return &posMsg{Pos{1, 1}, fmt.Sprintf("config is larger than %d bytes (1 MiB)", MaxSize)}
	}
	s := scanner{data: data, line: 1, col: 1}
	return s.run()
}

type scanner struct {
	data      []byte
	i         int
	line, col int // of data[i]; col counts characters, as the parsers do

	flow    int   // open flow collections
	indents []int // indentation of the open block collections
	nodes   int   // keys and values seen
}

func (s *scanner) tooDeep() *posMsg {
	return &posMsg{Pos{s.line, s.col}, fmt.Sprintf("lists and mappings nested more than %d levels deep", MaxDepth)}
}

func (s *scanner) peek(k int) byte {
	if s.i+k < len(s.data) {
		return s.data[s.i+k]
	}
	return 0
}

// next moves past one byte, keeping line and col.
func (s *scanner) next() {
	c := s.data[s.i]
	s.i++
	switch {
	case c == '\n':
		s.line, s.col = s.line+1, 1
	case c&0xC0 != 0x80: // not a UTF-8 continuation byte
		s.col++
	}
}

func (s *scanner) skipLine() {
	for s.i < len(s.data) && s.data[s.i] != '\n' {
		s.next()
	}
}

func blank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0 }

func flowIndicator(c byte) bool { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' }

// block notes a block collection entry whose indicator ("- ", "? ", or
// the key of "key: ") sits at column col (0-based): collections indented
// more are closed, and one at col is opened unless it is open already.
// Its position is that of the scanner for the error.
func (s *scanner) block(col int, at Pos) *posMsg {
	for len(s.indents) > 0 && s.indents[len(s.indents)-1] > col {
		s.indents = s.indents[:len(s.indents)-1]
	}
	if len(s.indents) > 0 && s.indents[len(s.indents)-1] == col {
		return nil
	}
	s.indents = append(s.indents, col)
	if len(s.indents)+s.flow > MaxDepth {
		return &posMsg{at, s.tooDeep().msg}
	}
	return nil
}

// open notes a flow collection opening at the scanner's position.
func (s *scanner) open() *posMsg {
	s.flow++
	if len(s.indents)+s.flow > MaxDepth {
		return s.tooDeep()
	}
	return nil
}

func (s *scanner) run() *posMsg {
	// Unless contInd is noCont, the previous line ended inside a plain
	// scalar (or a block scalar header) in a block collection indented
	// contInd (-1 at the top level); more indented lines are its text.
	contInd := noCont
	for s.i < len(s.data) {
		// At the start of a line, outside any flow collection.
		ind := 0
		for s.peek(ind) == ' ' {
			ind++
		}
		rest := s.peek(ind)
		if rest == '\n' || rest == '\r' || rest == '#' || rest == 0 || contInd != noCont && ind > contInd {
			// Blank, a comment, or text of a multi-line scalar.
			s.skipLine()
			if s.i < len(s.data) {
				s.next()
			}
			continue
		}
		contInd = noCont
		if ind == 0 && rest == '%' {
			s.skipLine()
			continue
		}
		if ind == 0 && s.docMarker() {
			s.i, s.col = s.i+3, s.col+3
		}
		for range ind {
			s.next()
		}
		var err *posMsg
		if contInd, err = s.lineBody(); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) docMarker() bool {
	if s.i+3 > len(s.data) {
		return false
	}
	m := string(s.data[s.i : s.i+3])
	return (m == "---" || m == "...") && blank(s.peek(3))
}

// noCont: the next line is not the text of a scalar.
const noCont = -2

// inner is the indentation of the innermost open block collection, -1 at
// the top level.
func (s *scanner) inner() int {
	if len(s.indents) == 0 {
		return -1
	}
	return s.indents[len(s.indents)-1]
}

// lineBody scans the rest of a line (and, inside a quoted scalar or a flow
// collection, as many lines as those span) from a node start. It returns the
// indentation that marks continuation lines (see run), or noCont.
func (s *scanner) lineBody() (int, *posMsg) {
	ls := lineState{nodeStart: true}
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '\n':
			s.next()
			if s.flow == 0 {
				return noCont, nil
			}
		case c == ' ' || c == '\t' || c == '\r':
			s.next()
		case c == '#':
			s.skipLine()
		case !ls.nodeStart:
			if err := s.afterNode(&ls, c); err != nil {
				return noCont, err
			}
		default:
			if cont, done, err := s.startNode(&ls, c); done {
				return cont, err
			}
		}
	}
	return noCont, nil
}

// lineState is where lineBody is within its line.
type lineState struct {
	nodeStart bool // a node may start at the next non-blank byte
	node      Pos  // where the last node started
	nodeCol   int  // and its 0-based column
}

// afterNode scans c, which follows a complete node: only separators and
// closers matter there.
func (s *scanner) afterNode(ls *lineState, c byte) *posMsg {
	switch {
	case s.flow > 0 && c == ',':
		ls.nodeStart = true
	case s.flow > 0 && (c == ']' || c == '}'):
		s.flow--
	case c == ':' && (blank(s.peek(1)) || s.flow > 0):
		if err := s.keyEnded(ls); err != nil {
			return err
		}
	case s.flow > 0 && (c == '[' || c == '{'):
		// Invalid YAML; count it rather than miss it.
		if err := s.open(); err != nil {
			return err
		}
	}
	s.next()
	return nil
}

// keyEnded notes that the last node was a key: a node may start again, and
// outside flow collections the key is an entry of a block mapping.
func (s *scanner) keyEnded(ls *lineState) *posMsg {
	ls.nodeStart = true
	if s.flow == 0 {
		return s.block(ls.nodeCol, ls.node)
	}
	return nil
}

// startNode counts the node starting at c and scans it, or the indicator
// that starts it. done reports that lineBody is to return cont and err.
func (s *scanner) startNode(ls *lineState, c byte) (cont int, done bool, err *posMsg) {
	ls.node, ls.nodeCol = Pos{s.line, s.col}, s.col-1
	if s.nodes++; s.nodes > MaxNodes {
		return noCont, true, &posMsg{ls.node, fmt.Sprintf("config holds more than %d keys and values", MaxNodes)}
	}
	switch {
	case c == '[' || c == '{':
		if err := s.open(); err != nil {
			return noCont, true, err
		}
		s.next()
	case (c == ']' || c == '}') && s.flow > 0:
		s.flow-- // an empty entry, as in "[a, ]"
		ls.nodeStart = false
		s.next()
	case c == ',' && s.flow > 0:
		s.next()
	case (c == '-' || c == '?' || c == ':') && blank(s.peek(1)):
		if s.flow == 0 && c != ':' {
			if err := s.block(ls.nodeCol, ls.node); err != nil {
				return noCont, true, err
			}
		}
		s.next()
	case c == '"' || c == '\'':
		s.quoted(c)
		ls.nodeStart = false
	case c == '&' || c == '!':
		// An anchor or a tag: the node itself follows.
		for s.i < len(s.data) && !blank(s.data[s.i]) && !(s.flow > 0 && flowIndicator(s.data[s.i])) {
			s.next()
		}
	case (c == '|' || c == '>') && s.flow == 0:
		s.skipLine()
		return s.inner(), true, nil // the block scalar's text is more indented
	default:
		return s.plainNode(ls)
	}
	return noCont, false, nil
}

// plainNode scans a plain scalar for startNode: a key puts lineBody back
// at a node start, and a value ending the line outside flow collections
// ends it, with more indented lines its continuation.
func (s *scanner) plainNode(ls *lineState) (cont int, done bool, err *posMsg) {
	ls.nodeStart = false
	if s.plain() {
		if err := s.keyEnded(ls); err != nil {
			return noCont, true, err
		}
		return noCont, false, nil
	}
	if s.flow == 0 && (s.i >= len(s.data) || s.data[s.i] == '\n') {
		return s.inner(), true, nil
	}
	return noCont, false, nil
}

// quoted skips a quoted scalar, which may span lines.
func (s *scanner) quoted(q byte) {
	s.next()
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case q == '"' && c == '\\' && s.i+1 < len(s.data):
			s.next()
		case c == q && q == '\'' && s.peek(1) == '\'':
			s.next()
		case c == q:
			s.next()
			return
		}
		s.next()
	}
}

// plain skips a plain scalar and reports whether it ended in ": " (it is a
// key). It stops before a comment, a line break or, in a flow collection,
// an indicator.
func (s *scanner) plain() (key bool) {
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '\n':
			return false
		case c == ':' && (blank(s.peek(1)) || s.flow > 0 && flowIndicator(s.peek(1))):
			s.next()
			return true
		case c == '#' && s.i > 0 && (s.data[s.i-1] == ' ' || s.data[s.i-1] == '\t'):
			return false
		case s.flow > 0 && flowIndicator(c):
			return false
		}
		s.next()
	}
	return false
}

// posMsg is a message at a position, before the file name is known.
type posMsg struct {
	Pos
	msg string
}
