package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/token"
)

// Hidden values are the Secret fields (admin_token, api_tokens[].token,
// auth.keys[].secret, tls.acme.rfc2136.tsig_secret) and the templates' env
// values: env often carries API keys and database URLs. GET /admin/config
// shows each non-empty one as Redacted, which ParseUpdate takes back (#13).

// envKey names an env value: the map's path, NUL, the variable (template
// names may contain dots; NUL is in neither).
func envKey(mapPath, name string) string { return mapPath + "\x00" + name }

// keepRaw records on c the text each hidden value was written as, before
// ${VAR} expansion, by a key that names the value rather than its place:
// an auth key's secret goes by its kid, so a PUT that reorders or removes
// keys cannot give one key another's secret.
func (d *decoder) keepRaw(c *Config) {
	for i, k := range c.Auth.Keys {
		old := fmt.Sprintf("auth.keys[%d].secret", i)
		if n, ok := d.hidden[old]; ok {
			delete(d.hidden, old)
			d.hidden[keySecretKey(k.KID)] = n
		}
	}
	c.raw = make(map[string]string, len(d.hidden))
	c.rawSrc = make(map[string]string, len(d.hidden))
	for k, n := range d.hidden {
		c.raw[k] = n.value
		if n.tk != nil {
			c.rawSrc[k] = scalarSource(n.tk)
		}
	}
}

// keySecretKey names the secret of the auth key kid among hidden values.
func keySecretKey(kid string) string { return "auth.keys[kid=" + kid + "].secret" }

// adminTokenKey names admin_token among hidden values (its YAML path).
const adminTokenKey = "admin_token"

// KeepCodeSecrets records the admin token and the auth keys' secrets that
// code set on c (the development default: serve makes its key and admin
// token) as the text they were written as, as the decoder does for a file.
// The REDACTED values of c's admin page copy then stand for them when that
// copy is validated, instead of "the running config has none here".
// A text a file gave is kept as it is (it may be a ${VAR} reference), and
// a value holding "${" is left out: read back, it would be expanded.
func (c *Config) KeepCodeSecrets() {
	if c.raw == nil {
		c.raw = make(map[string]string)
	}
	keep := func(key, v string) {
		if _, ok := c.raw[key]; !ok && v != "" && !strings.Contains(v, "${") {
			c.raw[key] = v
		}
	}
	keep(adminTokenKey, string(c.AdminToken))
	for _, k := range c.Auth.Keys {
		keep(keySecretKey(k.KID), string(k.Secret))
	}
}

// Redacted returns the effective config (defaults applied) as YAML, with
// every non-empty secret and template env value shown as "REDACTED": what
// GET /admin/config shows where RedactedSource cannot keep the file's text.
func (c *Config) Redacted() ([]byte, error) {
	cp := *c
	if cp.TLS.Mode == TLSOff {
		// Unused: showing the default ":443" on the admin page reads as if
		// previews were served over TLS there (#24, 5).
		cp.Listen.HTTPS = ""
	}
	out, err := marshal(&cp)
	if err != nil {
		return nil, fmt.Errorf("marshal config: %w", err)
	}
	return out, nil
}

// ParseUpdate is Parse for a config replacing live (PUT /admin/config): a
// secret or template env value written exactly as REDACTED (plain or
// quoted) keeps the text live was read from, so the output of
// GET /admin/config can be sent back as is. It returns the config and the
// bytes to write to the file: data as sent, comments and layout included,
// with each REDACTED replaced by that text (quoted where the running
// file's own text would read differently), so "${VAR}" stays a reference
// and no secret the file did not hold is written to it. Nothing else of
// the running file is kept: a body is the whole new file. A REDACTED with
// nothing running to stand for is an error at its position. live may be
// nil.
func ParseUpdate(name string, data []byte, live *Config) (*Config, []byte, error) {
	return parseUpdate(name, data, live, os.LookupEnv)
}

func parseUpdate(name string, data []byte, live *Config, lookup func(string) (string, bool)) (*Config, []byte, error) {
	_, d, err := decodeOnly(name, data, lookup)
	if err != nil {
		return nil, nil, err
	}
	var liveRaw map[string]string
	if live != nil {
		liveRaw = live.raw
	}
	texts := map[*token.Token]string{}    // REDACTED scalar -> replacement
	srcTexts := map[*token.Token]string{} // the same, as the running file wrote them
	restored := map[string]string{}       // hidden key -> the running text
	var errs ErrorList
	errAt := func(n *node, msg string) {
		errs = append(errs, &Error{File: name, Line: n.pos.Line, Col: n.pos.Col, Msg: msg})
	}
	hiddenAt := map[*token.Token]int{} // how many hidden places read each token
	for _, n := range d.hidden {
		if n.tk != nil {
			hiddenAt[n.tk]++
		}
	}
	for _, key := range slices.Sorted(maps.Keys(d.hidden)) {
		n := d.hidden[key]
		if n.value != Redacted {
			continue
		}
		if n.tk != nil && d.reads[n.tk] > hiddenAt[n.tk] {
			// An alias of it is read where values show (image: *s): the
			// running secret would be there for GET /admin/config.
			errAt(n, "this REDACTED is also used, through an alias, where its value would show; write the value")
			continue
		}
		raw, ok := liveRaw[key]
		if !ok {
			errAt(n, hiddenName(key)+": REDACTED keeps the running value, but the running config has none here; write the value")
			continue
		}
		q := yamlQuote(raw)
		srcTexts[n.tk] = cmp.Or(live.rawSrc[key], q)
		restored[key] = raw
		if n.tk == nil || scalarSource(n.tk) != quotedAs(n.tk, Redacted) { // a block scalar, escapes
			errAt(n, "write REDACTED plainly or in simple quotes to keep the running value")
			continue
		}
		if prev, dup := texts[n.tk]; dup && prev != q {
			errAt(n, "this REDACTED (an anchor used in several places) stands for different running values; write them out")
			continue
		}
		texts[n.tk] = q
	}
	if len(errs) > 0 {
		errs.sort()
		return nil, nil, errs
	}
	if len(texts) > 0 {
		// Each REDACTED as the running file wrote it, so a round trip
		// changes no byte (#24, 2) — unless its new place reads that text
		// differently (plain ${X} moved into a flow mapping): then quoted.
		if kept, err := rewrite(name, data, d.first, srcTexts); err == nil && restores(name, kept, restored, lookup) {
			data = kept
		} else if data, err = rewrite(name, data, d.first, texts); err != nil {
			return nil, nil, err
		}
	}
	c, err := parse(name, data, lookup)
	if err != nil {
		return nil, nil, scrub(err, slices.Collect(maps.Values(restored)), lookup)
	}
	return c, data, nil
}

// restores reports whether data, decoded, holds each hidden value of want
// (hidden key -> text) as that text.
func restores(name string, data []byte, want map[string]string, lookup func(string) (string, bool)) bool {
	c, _, err := decodeOnly(name, data, lookup)
	if err != nil {
		return false
	}
	for k, v := range want {
		if got, ok := c.raw[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// scrub puts REDACTED back for every running value a REDACTED stood for
// in err's messages: an alias can carry a spliced secret to a field whose
// error quotes its value (secret: &s REDACTED, then log: {level: *s}), and
// the caller (the admin API) shows the errors to whoever sent the text.
func scrub(err error, raws []string, lookup func(string) (string, bool)) error {
	var list ErrorList
	if !errors.As(err, &list) || len(raws) == 0 {
		return err
	}
	secrets := map[string]string{}
	for _, raw := range raws {
		secrets[raw], secrets[yamlQuote(raw)] = Redacted, Redacted
		if v, _, xerr := expand(raw, lookup); xerr == nil {
			secrets[v] = Redacted
		}
	}
	out := make(ErrorList, len(list))
	for i, e := range list {
		ec := *e
		ec.Msg = replaceLongest(ec.Msg, secrets)
		out[i] = &ec
	}
	return out
}

// hiddenName is key as the user wrote it.
func hiddenName(key string) string {
	if m, v, ok := strings.Cut(key, "\x00"); ok {
		return m + "." + v
	}
	return key
}

// rewrite gives back data, parsed into the tokens from first on, with each
// token of texts (a REDACTED scalar) written as its text instead. The rest
// is the tokens' own text (Origin), so comments, order and layout stay as
// written: the document model edits of the file build on (#24).
func rewrite(name string, data []byte, first *token.Token, texts map[*token.Token]string) ([]byte, error) {
	out, ok := editTokens(data, first, texts)
	if !ok {
		return nil, ErrorList{{File: name, Line: 1, Col: 1, Msg: "this file cannot be kept as written with REDACTED in it; write the values"}}
	}
	return out, nil
}

// editTokens gives back data with each scalar token of texts written as
// its text, the rest as the tokens hold it (Origin) up to the last token;
// what follows is blank or comments. ok is false when the tokens do not
// give back the text as written: then nothing is to be written rather
// than a changed file.
func editTokens(data []byte, first *token.Token, texts map[*token.Token]string) (_ []byte, ok bool) {
	var orig, out strings.Builder
	for tk := first; tk != nil; tk = tk.Next {
		o := tk.Origin
		orig.WriteString(o)
		if text, ok := texts[tk]; ok {
			start := len(o) - len(strings.TrimLeft(o, " \t\r\n"))
			o = o[:start] + text + o[len(strings.TrimRight(o, " \t\r\n")):]
		}
		out.WriteString(o)
	}
	if !strings.HasPrefix(string(data), orig.String()) {
		return nil, false
	}
	out.Write(data[orig.Len():])
	return []byte(out.String()), true
}

// quotedAs is s in the quotes of the scalar token tk.
func quotedAs(tk *token.Token, s string) string {
	switch tk.Type {
	case token.DoubleQuoteType:
		return `"` + s + `"`
	case token.SingleQuoteType:
		return `'` + s + `'`
	}
	return s
}

// yamlQuote writes s as a YAML double-quoted scalar on one line. Go's
// escapes (\n, \t, \xNN below 0x80, \uNNNN, \UNNNNNNNN) are YAML's too, and
// s, text the decoder read, is valid UTF-8 (TestYAMLQuote).
func yamlQuote(s string) string { return strconv.Quote(s) }

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
