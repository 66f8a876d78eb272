package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// sandboxes ls: the API's list as a table.

// sandboxRow is what ls shows of GET /admin/sandboxes.
type sandboxRow struct {
	ID           string    `json:"id"`
	Template     string    `json:"template"`
	State        string    `json:"state"`
	Container    string    `json:"container"`
	StartedAt    time.Time `json:"started_at"`
	LastActivity time.Time `json:"last_activity"`
	LastFailure  *struct {
		Reason   string `json:"reason"`
		ExitCode *int   `json:"exit_code"`
	} `json:"last_failure"`
}

// state is the STATE column: a sandbox that is not running says why its
// last start failed, as the API's last_failure and the admin page do.
func (r sandboxRow) state() string {
	f := r.LastFailure
	if f == nil || r.State == "running" {
		return dash(r.State)
	}
	if f.ExitCode != nil {
		return fmt.Sprintf("%s (%s, code %d)", dash(r.State), f.Reason, *f.ExitCode)
	}
	return fmt.Sprintf("%s (%s)", dash(r.State), f.Reason)
}

func sbxList(c *sandboxesCmd) error {
	if err := c.connect(0); err != nil {
		return err
	}
	b, err := c.get("GET", "/admin/sandboxes"+c.listQuery(), nil, callTimeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var rows []sandboxRow
	var extra []lsExtra
	if err := json.Unmarshal(b, &rows); err != nil {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes ls: the answer is not a list of sandboxes: %w", err))
	}
	if err := json.Unmarshal(b, &extra); err != nil || len(extra) != len(rows) {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes ls: the answer is not a list of sandboxes: %w", err))
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.stdout, "no sandboxes")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTEMPLATE\tSTATE\tSTARTED\tLAST ACTIVITY\tCONTAINER"+lsColumns)
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s%s\n", r.ID, dash(r.Template), r.state(),
			ago(now, r.StartedAt), ago(now, r.LastActivity), dash(shortContainer(r.Container)), extra[i].columns(now))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortContainer shortens a Docker container id as docker ps does; other
// runtimes' names stay whole.
func shortContainer(s string) string {
	if len(s) == 64 && strings.Trim(s, "0123456789abcdef") == "" {
		return s[:12]
	}
	return s
}

// ago says how long before now t was, in the largest unit that fits.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}
