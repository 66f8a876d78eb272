package docker

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// watchedActions are the event actions asked from Docker.
var watchedActions = []string{runtime.EventDie, runtime.EventOOM, runtime.EventStop, runtime.EventKill,
	runtime.EventDestroy, runtime.EventPause, runtime.EventUnpause, runtime.EventStart, runtime.EventRename}

// Watch follows container events of containers carrying labels.
func (e *Runtime) Watch(ctx context.Context, since time.Time, labels map[string]string, fn func(runtime.Event)) error {
	f := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)))
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	for _, a := range watchedActions {
		f.Add("event", a)
	}
	opts := events.ListOptions{Filters: f}
	if !since.IsZero() {
		opts.Since = fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond())
	}
	// Settle the API version first: the SDK's Events reads it unguarded.
	if _, err := e.cli.ServerVersion(ctx); err != nil {
		return classify("docker events", err, nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the SDK's reader goroutine
	msgs, errs := e.cli.Events(ctx, opts)
	for {
		select {
		case msg := <-msgs:
			if !runtime.HasLabels(msg.Actor.Attributes, labels) {
				// The server filtered on the labels; this keeps the scope
				// even if an engine ignored a filter (#13).
				continue
			}
			ev := runtime.Event{
				Action:  string(msg.Action),
				ID:      msg.Actor.ID,
				Name:    msg.Actor.Attributes["name"],
				OldName: trimSlash(msg.Actor.Attributes["oldName"]),
				Pool:    msg.Actor.Attributes[runtime.LabelPool], // labels ride in the attributes
				Labels:  msg.Actor.Attributes,
			}
			if msg.TimeNano != 0 {
				ev.Time = time.Unix(0, msg.TimeNano)
			}
			fn(ev)
		case err := <-errs:
			if err == nil {
				err = io.EOF
			}
			return classify("docker events", err, nil)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
