package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The sandboxes commands for #23's traffic, metadata and pause: requests,
// pause, resume, and ls --metadata / up --metadata.

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

// listQuery is ls's query: its metadata filters.
func (c *sandboxesCmd) listQuery() string {
	if len(c.metadata) == 0 {
		return ""
	}
	q := url.Values{}
	for k, v := range c.metadata {
		q.Set("metadata."+k, v)
	}
	return "?" + q.Encode()
}

// lsExtra is what ls shows beyond sandboxRow: traffic, why awake, metadata.
type lsExtra struct {
	Metadata map[string]string `json:"metadata"`
	Traffic  *struct {
		Requests int64 `json:"requests"`
	} `json:"traffic"`
	Awake *struct {
		StopsAt time.Time `json:"stops_at"`
		Action  string    `json:"action"`
	} `json:"awake"`
}

// lsColumns are the columns ls prints after CONTAINER.
const lsColumns = "\tREQUESTS\tIDLE STOP\tMETADATA"

func (e lsExtra) columns(now time.Time) string {
	reqs := "-"
	if e.Traffic != nil {
		reqs = strconv.FormatInt(e.Traffic.Requests, 10)
	}
	stop := "-"
	if e.Awake != nil && !e.Awake.StopsAt.IsZero() {
		stop = e.Awake.Action + " " + in(now, e.Awake.StopsAt)
	}
	return "\t" + reqs + "\t" + stop + "\t" + dash(metaFlag(e.Metadata).String())
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

func sbxPause(c *sandboxesCmd) error { return c.op("POST", "/pause", "paused", callTimeout) }

// sbxResume waits as long as the API does (serverBounded).
func sbxResume(c *sandboxesCmd) error { return c.op("POST", "/resume", "running", serverBounded) }

// sbxRequests prints a sandbox's last requests through the replica that
// answers, newest first.
func sbxRequests(c *sandboxesCmd) error {
	if err := c.connect(1); err != nil {
		return err
	}
	path := sandboxPath(c.args[0], "/requests")
	if c.n > 0 {
		path += "?n=" + strconv.Itoa(c.n)
	}
	b, err := c.get("GET", path, nil, callTimeout)
	if err != nil || c.json {
		return writeOr(c, b, err)
	}
	var r struct {
		Replica  string `json:"replica"`
		Requests []struct {
			Time     time.Time `json:"time"`
			Method   string    `json:"method"`
			Path     string    `json:"path"`
			Status   int       `json:"status"`
			Millis   float64   `json:"duration_ms"`
			BytesIn  int64     `json:"bytes_in"`
			BytesOut int64     `json:"bytes_out"`
			Client   string    `json:"client"`
		} `json:"requests"`
		Counters *struct {
			Requests int64 `json:"requests"`
			BytesIn  int64 `json:"bytes_in"`
			BytesOut int64 `json:"bytes_out"`
		} `json:"counters"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return failed(codeBadAnswer, fmt.Errorf("sandboxes requests: unexpected answer: %w", err))
	}
	if r.Counters != nil {
		fmt.Fprintf(c.stdout, "replica %s: %d requests, %d bytes in, %d bytes out\n", dash(r.Replica), r.Counters.Requests, r.Counters.BytesIn, r.Counters.BytesOut)
	}
	if len(r.Requests) == 0 {
		fmt.Fprintf(c.stdout, "no requests through replica %s\n", dash(r.Replica))
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tMETHOD\tPATH\tSTATUS\tMS\tIN\tOUT\tCLIENT")
	for _, q := range r.Requests {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%d\t%d\t%s\n", q.Time.Local().Format("15:04:05.000"), q.Method, strconv.Quote(q.Path)[1:len(strconv.Quote(q.Path))-1],
			q.Status, q.Millis, q.BytesIn, q.BytesOut, dash(q.Client))
	}
	return tw.Flush()
}
