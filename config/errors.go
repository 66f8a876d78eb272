package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a config file, at the position of the offending
// value (or key). Line and Col are 1-based.
type Error struct {
	File string
	Line int
	Col  int
	Msg  string
}

// Error renders "FILE:LINE:COL: message".
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// ErrorList is every problem found in a file, sorted by position. Parse and
// Load return it (never empty) when the file is invalid; use errors.As to
// get at the individual errors.
type ErrorList []*Error

// Error renders one "FILE:LINE:COL: message" per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find an individual *Error.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l ErrorList) sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}

// Pos is a 1-based position in the file.
type Pos struct{ Line, Col int }
