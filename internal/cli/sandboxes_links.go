package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/previewgate/previewgate/adminapi"
)

// sandboxes link and set (#23): share links and per-sandbox settings from
// a terminal, over PATCH /admin/sandboxes/{id} and .../links.

func sbxLinkNew(c *sandboxesCmd) error {
	return answer(c, callTimeout, func(ctx context.Context) (adminapi.Link, error) {
		return c.api.CreateLink(ctx, c.args[0], adminapi.LinkRequest{TTL: c.ttl, Port: c.port, Path: c.path})
	}, func(l adminapi.Link) error {
		_, err := fmt.Fprintf(c.stdout, "link %s for port %d, path %s, expires %s (in %s)\n%s\n", l.ID, l.Port, l.Path,
			l.Expires.Local().Format(time.RFC3339), time.Until(l.Expires).Round(time.Second), l.URL)
		return err
	})
}

func sbxLinkList(c *sandboxesCmd) error {
	call := func(ctx context.Context) (adminapi.Links, error) { return c.api.ListLinks(ctx, c.args[0]) }
	return answer(c, callTimeout, call, func(r adminapi.Links) error {
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
	})
}

func sbxLinkRemove(c *sandboxesCmd) error {
	id, lid := c.args[0], c.args[1]
	call := func(ctx context.Context) (adminapi.LinkRevoked, error) { return c.api.RevokeLink(ctx, id, lid) }
	return answer(c, callTimeout, call, func(r adminapi.LinkRevoked) error {
		_, err := fmt.Fprintf(c.stdout, "link %s of sandbox %s revoked\n", lid, id)
		return err
	})
}

func sbxSet(c *sandboxesCmd) error {
	var p adminapi.SettingsPatch
	switch c.public {
	case "":
	case "default":
		p.Public = adminapi.Null[bool]()
	default:
		v, err := strconv.ParseBool(c.public)
		if err != nil {
			return failed(codeUsage, fmt.Errorf("sandboxes set: --public %q: want true, false or default", c.public))
		}
		p.Public = adminapi.Value(v)
	}
	if c.keepUp != "" {
		p.KeepUp = &c.keepUp
	}
	switch c.keepUpUntil {
	case "":
	case "none":
		p.KeepUpUntil = adminapi.Null[string]()
	default:
		p.KeepUpUntil = adminapi.Value(c.keepUpUntil) // the API says what is wrong with it
	}
	if p.Public.IsZero() && p.KeepUp == nil && p.KeepUpUntil.IsZero() {
		return failed(codeUsage, fmt.Errorf("sandboxes set: nothing to set: give --public, --keep-up or --keep-up-until"))
	}
	call := func(ctx context.Context) (adminapi.Settings, error) { return c.api.PatchSettings(ctx, c.args[0], p) }
	return answer(c, callTimeout, call, func(r adminapi.Settings) error {
		if r.Note != "" {
			fmt.Fprintln(c.stderr, "note: "+r.Note) // a keep-up that waits until it runs
		}
		from := "its template's"
		if r.PublicSetting != nil {
			from = "its own setting"
		}
		fmt.Fprintf(c.stdout, "sandbox %s: public %t (%s)", c.args[0], r.Public, from)
		if r.KeepUpUntil != nil {
			fmt.Fprintf(c.stdout, ", kept up until %s", r.KeepUpUntil.Local().Format(time.RFC3339))
		}
		_, err := fmt.Fprintln(c.stdout)
		return err
	})
}
