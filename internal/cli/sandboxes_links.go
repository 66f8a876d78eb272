package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// sandboxes link and set (#23): share links and per-sandbox settings from
// a terminal, over PATCH /admin/sandboxes/{id} and .../links.

// extFlags are the flags of link and set.
type extFlags struct {
	ttl, path      string // link
	port           int    // link
	public, keepUp string // set
	keepUpUntil    string // set
}

// register adds name's flags to fs.
func (x *extFlags) register(name string, fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
}) {
	switch name {
	case "link":
		fs.StringVar(&x.ttl, "ttl", "", "the link's lifetime, e.g. 10m (default: the gateway's auth.link_ttl)")
		fs.IntVar(&x.port, "port", 0, "the sandbox port it opens (default: its template's port)")
		fs.StringVar(&x.path, "path", "", "the path prefix it opens, and lands on (default /)")
	case "set":
		fs.StringVar(&x.public, "public", "", "true, false, or default (the template's)")
		fs.StringVar(&x.keepUp, "keep-up", "", "keep it running this long from now whatever its traffic, e.g. 2h (0s ends it)")
		fs.StringVar(&x.keepUpUntil, "keep-up-until", "", "the same until an RFC 3339 time, e.g. 2026-11-27T18:00:00Z (none ends it)")
	}
}

func init() {
	sandboxesSynopsis["link"] = "sandboxes link ID [--ttl 10m] [--port N] [--path /x] [flags]   (mint a share link)"
	sandboxesSynopsis["link ls"] = "sandboxes link ls ID [flags]   (list ID's share links)"
	sandboxesSynopsis["link rm"] = "sandboxes link rm ID LINKID [flags]   (revoke a share link)"
	sandboxesSynopsis["set"] = "sandboxes set ID [--public true|false|default] [--keep-up 2h | --keep-up-until TIME] [flags]   (per-sandbox settings)"
	sandboxesCmds["set"] = sbxSet
}

// sandboxesLink runs "sandboxes link ARGS".
func sandboxesLink(args []string, stdout, stderr io.Writer) error {
	name, run := "link", sbxLinkNew
	if len(args) > 0 {
		switch args[0] {
		case "ls":
			name, run, args = "link ls", sbxLinkList, args[1:]
		case "rm":
			name, run, args = "link rm", sbxLinkRemove, args[1:]
		}
	}
	c := &sandboxesCmd{name: name, stdout: stdout, stderr: stderr}
	return c.parse(args).run(run)
}

func sbxLinkNew(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	body := map[string]any{}
	if c.ext.ttl != "" {
		body["ttl"] = c.ext.ttl
	}
	if c.ext.port != 0 {
		body["port"] = c.ext.port
	}
	if c.ext.path != "" {
		body["path"] = c.ext.path
	}
	b, err := c.get("POST", sandboxPath(c.args[0], "/links"), body, callTimeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var l linkRow
	if err := json.Unmarshal(b, &l); err != nil {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes link: unexpected answer: %w", err))
	}
	fmt.Fprintf(c.stdout, "link %s for port %d, path %s, expires %s (in %s)\n%s\n", l.ID, l.Port, l.Path,
		l.Expires.Local().Format(time.RFC3339), time.Until(l.Expires).Round(time.Second), l.URL)
	return nil
}

// linkRow is a link as the API answers it.
type linkRow struct {
	ID      string     `json:"id"`
	URL     string     `json:"url"`
	Port    int        `json:"port"`
	Path    string     `json:"path"`
	Created time.Time  `json:"created"`
	Expires time.Time  `json:"expires"`
	Revoked *time.Time `json:"revoked"`
}

func sbxLinkList(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	b, err := c.get("GET", sandboxPath(c.args[0], "/links"), nil, callTimeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var r struct {
		Links []linkRow `json:"links"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes link ls: unexpected answer: %w", err))
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tPORT\tPATH\tCREATED\tEXPIRES\tSTATE")
	now := time.Now()
	for _, l := range r.Links {
		state := "valid"
		if l.Revoked != nil {
			state = "revoked"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", l.ID, l.Port, l.Path, ago(now, l.Created),
			"in "+time.Until(l.Expires).Round(time.Second).String(), state)
	}
	return tw.Flush()
}

func sbxLinkRemove(c *sandboxesCmd) error {
	if c.parseErr == nil && len(c.args) == 2 {
		lid := c.args[1]
		c.args = c.args[:1]
		if err := c.connect(1); err != nil {
			return err
		}
		b, err := c.get("DELETE", sandboxPath(c.args[0], "/links/"+url.PathEscape(lid)), nil, callTimeout)
		if err != nil || c.json {
			return writeOr(c, b, err)
		}
		fmt.Fprintf(c.stdout, "link %s of sandbox %s revoked\n", lid, c.args[0])
		return nil
	}
	return c.connect(2) // prints the usage
}

func sbxSet(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	body := map[string]any{}
	switch c.ext.public {
	case "":
	case "default":
		body["public"] = nil
	default:
		v, err := strconv.ParseBool(c.ext.public)
		if err != nil {
			return failed(codeUsage, fmt.Errorf("sandboxes set: --public %q: want true, false or default", c.ext.public))
		}
		body["public"] = v
	}
	if c.ext.keepUp != "" {
		body["keep_up"] = c.ext.keepUp
	}
	switch c.ext.keepUpUntil {
	case "":
	case "none":
		body["keep_up_until"] = nil
	default:
		body["keep_up_until"] = c.ext.keepUpUntil // the API says what is wrong with it
	}
	if len(body) == 0 {
		return failed(codeUsage, fmt.Errorf("sandboxes set: nothing to set: give --public, --keep-up or --keep-up-until"))
	}
	b, err := c.get("PATCH", sandboxPath(c.args[0], ""), body, callTimeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var r struct {
		Public      bool       `json:"public"`
		Setting     *bool      `json:"public_setting"`
		KeepUpUntil *time.Time `json:"keep_up_until"`
		Note        string     `json:"note"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes set: unexpected answer: %w", err))
	}
	if r.Note != "" {
		fmt.Fprintln(c.stderr, "note: "+r.Note) // a keep-up that waits until it runs
	}
	from := "its template's"
	if r.Setting != nil {
		from = "its own setting"
	}
	fmt.Fprintf(c.stdout, "sandbox %s: public %t (%s)", c.args[0], r.Public, from)
	if r.KeepUpUntil != nil {
		fmt.Fprintf(c.stdout, ", kept up until %s", r.KeepUpUntil.Local().Format(time.RFC3339))
	}
	fmt.Fprintln(c.stdout)
	return nil
}
