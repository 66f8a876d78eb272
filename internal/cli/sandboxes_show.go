package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// sandboxes show: GET /admin/sandboxes/{id} from a terminal, one sandbox
// as ls lists it, with what ls has no room for.

func init() {
	sandboxesSynopsis["show"] = "sandboxes show ID [flags]   (one sandbox: state, activity, why it is up, settings)"
	sandboxesCmds["show"] = sbxShow
}

// showExtra is what show prints beyond ls's columns.
type showExtra struct {
	Awake *struct {
		Summary string   `json:"summary"`
		Reasons []string `json:"reasons"`
	} `json:"awake"`
	Traffic *struct {
		Replica string `json:"replica"`
	} `json:"traffic"`
	PublicSetting *bool      `json:"public_setting"`
	KeepUpUntil   *time.Time `json:"keep_up_until"`
	LiveLinks     int        `json:"live_links"`
}

func sbxShow(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	b, err := c.get("GET", sandboxPath(c.args[0], ""), nil, callTimeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var (
		row   sandboxRow
		ls    lsExtra
		extra showExtra
	)
	for _, v := range []any{&row, &ls, &extra} {
		if err := json.Unmarshal(b, v); err != nil {
			return failed(codeBadAnswer, fmt.Errorf("sandboxes show: the answer is not a sandbox: %w", err))
		}
	}
	now := time.Now()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	line("ID", row.ID)
	line("TEMPLATE", dash(row.Template))
	line("STATE", row.state())
	line("STARTED", ago(now, row.StartedAt))
	line("LAST ACTIVITY", ago(now, row.LastActivity))
	line("CONTAINER", dash(row.Container))
	cols := strings.Split(ls.columns(now), "\t")[1:] // REQUESTS, IDLE STOP, METADATA
	reqs := cols[0]
	if extra.Traffic != nil {
		reqs += " (through replica " + dash(extra.Traffic.Replica) + ")"
	}
	line("REQUESTS", reqs)
	line("IDLE STOP", cols[1])
	if extra.Awake != nil {
		line("AWAKE", strings.Join(append([]string{extra.Awake.Summary}, extra.Awake.Reasons...), "; "))
	}
	public := "template's"
	if extra.PublicSetting != nil {
		public = strconv.FormatBool(*extra.PublicSetting) + " (its own setting)"
	}
	line("PUBLIC", public)
	if extra.KeepUpUntil != nil {
		line("KEPT UP UNTIL", extra.KeepUpUntil.Local().Format(time.RFC3339))
	}
	line("LIVE LINKS", strconv.Itoa(extra.LiveLinks))
	line("METADATA", cols[2])
	return tw.Flush()
}
