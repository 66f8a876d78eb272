package config

import (
	"strings"

	"github.com/goccy/go-yaml/token"
)

// The config API shows and takes the file as written (#24, 2): GET
// /admin/config is the text the live config was read from, comments,
// order and layout kept, with each hidden value (see Redacted) replaced by
// REDACTED in the same quoting; sent back, ParseUpdate restores each
// REDACTED as the file wrote it, so a GET -> PUT round trip rewrites
// nothing and an edit changes only the lines edited. Both edit goccy's
// tokens (rewrite), the one document model of the file.

// RedactedSource is the file text c was read from with every non-empty
// hidden value shown as REDACTED. A config not read from text (the
// embedded default), or one whose text cannot be kept (a hidden value in
// a block scalar), is shown as Redacted shows it.
func (c *Config) RedactedSource() ([]byte, error) {
	if c.src == nil {
		return c.Redacted()
	}
	// Tokens do not depend on ${VAR} values; any will do.
	_, d, err := decodeOnly(c.Path, c.src, func(string) (string, bool) { return "set", true })
	if err != nil || d.first == nil {
		return c.Redacted()
	}
	texts := map[*token.Token]string{}
	for _, n := range d.hidden {
		if n.value == "" {
			continue
		}
		if n.tk == nil {
			return c.Redacted()
		}
		texts[n.tk] = quotedAs(n.tk, Redacted)
	}
	out, ok := editTokens(c.src, d.first, texts)
	if !ok {
		return c.Redacted() // the tokens do not give back the text: show the values instead
	}
	return out, nil
}

// scalarSource is a scalar token's text as the file has it: its Origin
// without the blanks around it.
func scalarSource(tk *token.Token) string {
	return strings.TrimSpace(tk.Origin)
}
