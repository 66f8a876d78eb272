package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/previewgate/previewgate/adminapi"
)

// sandboxes ls and show: the API's sandboxes as tables.

func sbxList(c *sandboxesCmd) error {
	call := func(ctx context.Context) ([]adminapi.Sandbox, error) { return c.api.ListSandboxes(ctx, c.metadata) }
	return answer(c, callTimeout, call, func(list []adminapi.Sandbox) error {
		if len(list) == 0 {
			fmt.Fprintln(c.stdout, "no sandboxes")
			return nil
		}
		now := time.Now()
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTEMPLATE\tSTATE\tSTARTED\tLAST ACTIVITY\tCONTAINER\tREQUESTS\tIDLE STOP\tMETADATA")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, dash(s.Template), state(s),
				ago(now, s.StartedAt), ago(now, s.LastActivity), dash(shortContainer(s.Container)),
				requests(s), idleStop(s, now), dash(metaFlag(s.Metadata).String()))
		}
		return tw.Flush()
	})
}

// sbxShow is one sandbox as ls lists it, with what ls has no room for.
func sbxShow(c *sandboxesCmd) error {
	call := func(ctx context.Context) (adminapi.Sandbox, error) { return c.api.GetSandbox(ctx, c.args[0]) }
	return answer(c, callTimeout, call, func(s adminapi.Sandbox) error {
		now := time.Now()
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		line := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
		line("ID", s.ID)
		line("TEMPLATE", dash(s.Template))
		line("STATE", state(s))
		line("STARTED", ago(now, s.StartedAt))
		line("LAST ACTIVITY", ago(now, s.LastActivity))
		line("CONTAINER", dash(s.Container))
		reqs := requests(s)
		if s.Traffic != nil {
			reqs += " (through replica " + dash(s.Traffic.Replica) + ")"
		}
		line("REQUESTS", reqs)
		line("IDLE STOP", idleStop(s, now))
		if s.Awake != nil {
			line("AWAKE", strings.Join(append([]string{s.Awake.Summary}, s.Awake.Reasons...), "; "))
		}
		public := "template's"
		if s.PublicSetting != nil {
			public = strconv.FormatBool(*s.PublicSetting) + " (its own setting)"
		}
		line("PUBLIC", public)
		if !s.KeepUpUntil.IsZero() {
			line("KEPT UP UNTIL", s.KeepUpUntil.Local().Format(time.RFC3339))
		}
		line("LIVE LINKS", strconv.Itoa(s.LiveLinks))
		line("METADATA", dash(metaFlag(s.Metadata).String()))
		return tw.Flush()
	})
}

// state is the STATE column: a sandbox that is not running says why its
// last start failed, as the API's last_failure and the admin page do.
func state(s adminapi.Sandbox) string {
	f := s.LastFailure
	if f == nil || s.State == "running" {
		return dash(s.State)
	}
	if f.ExitCode != nil {
		return fmt.Sprintf("%s (%s, code %d)", dash(s.State), f.Reason, *f.ExitCode)
	}
	return fmt.Sprintf("%s (%s)", dash(s.State), f.Reason)
}

// requests is the REQUESTS column: through the replica that answered.
func requests(s adminapi.Sandbox) string {
	if s.Traffic == nil {
		return "-"
	}
	return strconv.FormatInt(s.Traffic.Requests, 10)
}

// idleStop is the IDLE STOP column: when the idle reaper acts, and how.
func idleStop(s adminapi.Sandbox, now time.Time) string {
	if s.Awake == nil || s.Awake.StopsAt.IsZero() {
		return "-"
	}
	return s.Awake.Action + " " + in(now, s.Awake.StopsAt)
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

// in says how long after now t is ("due" once past).
func in(now, t time.Time) string {
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "due"
	case d < time.Minute:
		return fmt.Sprintf("in %ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("in %dm", int(d/time.Minute))
	}
	return fmt.Sprintf("in %dh", int(d/time.Hour))
}

// metaFlag collects repeated --metadata KEY=VALUE.
type metaFlag map[string]string

func (m metaFlag) String() string {
	var s []string
	for k, v := range m {
		s = append(s, k+"="+v)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func (m metaFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	if _, dup := m[k]; dup {
		return fmt.Errorf("%q given twice", k)
	}
	m[k] = v
	return nil
}
