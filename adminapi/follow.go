package adminapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// MaxLogEvent bounds one event of a followed log.
const MaxLogEvent = 1 << 20

// FollowLogs calls fn with id's last tail lines of output, then with each
// new one, until the container stops or is removed (nil: GetSandbox then
// says which), fn fails (its error), or ctx ends. The gateway saying
// following failed is an error wrapping ErrFollowFailed; a stream that
// breaks off or ends early, ErrStreamBroken.
func (c *Client) FollowLogs(ctx context.Context, id string, tail int, fn func(line string) error) error {
	resp, err := c.send(ctx, http.MethodGet, sandboxPath(id, "/logs?tail="+strconv.Itoa(tail)+"&follow=1"), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return readLogEvents(resp.Body, fn)
}

// readLogEvents reads a logs?follow=1 stream: server-sent events, one
// JSON string a line of output, "event: end" once the container's output
// ended, "event: error" when following failed.
func readLogEvents(body io.Reader, fn func(string) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLogEvent)
	event, data := "", ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event:"); ok {
			event = strings.TrimSpace(v)
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = strings.TrimPrefix(v, " ")
			continue
		}
		if line != "" {
			continue // comments and fields it does not use
		}
		switch event {
		case "end":
			return nil
		case "error":
			var msg string
			if json.Unmarshal([]byte(data), &msg) != nil {
				msg = data
			}
			return &answerError{kind: ErrFollowFailed, msg: "following stopped: " + msg}
		case "":
			if data == "" {
				break
			}
			var l string
			if err := json.Unmarshal([]byte(data), &l); err != nil {
				return &answerError{kind: ErrBadAnswer, msg: fmt.Sprintf("unexpected event %.100q", data)}
			}
			if err := fn(l); err != nil {
				return err
			}
		}
		event, data = "", ""
	}
	if err := sc.Err(); err != nil {
		return &answerError{kind: ErrStreamBroken, msg: "the stream broke: " + err.Error(), err: err}
	}
	return &answerError{kind: ErrStreamBroken, msg: "the gateway ended the stream before the container stopped"}
}
