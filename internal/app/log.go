package app

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/previewgate/previewgate/config"
)

// newLogger makes the process's logger from the log settings: text on a
// terminal, JSON otherwise (format auto), durations as "1.2s".
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String()) // "1.2s", not nanoseconds
		}
		return a
	}}
	format := c.Format
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(&componentHandler{h: h})
}

// componentHandler keeps one "component" per record: a logger handed to a
// package is tagged with it (serve tags the gateway's), and a package that
// tags the logger of a part of its own again (the gateway's auth verifier,
// certs) replaces the tag instead of adding a second "component" key,
// which JSON consumers read as the first or the last at random (#16). The
// component is written first, before the record's other attributes.
// Inside a group a "component" attribute is the group's own and passes.
type componentHandler struct {
	h         slog.Handler
	component slog.Value // zero Kind (Any with nil) while unset
	set       bool
}

func (c *componentHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return c.h.Enabled(ctx, l)
}

func (c *componentHandler) Handle(ctx context.Context, r slog.Record) error {
	if !c.set {
		return c.h.Handle(ctx, r)
	}
	nr := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	nr.AddAttrs(slog.Attr{Key: "component", Value: c.component})
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(a)
		return true
	})
	return c.h.Handle(ctx, nr)
}

func (c *componentHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := *c
	rest := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if a.Key == "component" {
			out.component, out.set = a.Value, true
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) > 0 {
		out.h = c.h.WithAttrs(rest)
	}
	return &out
}

// WithGroup writes the component out first: attributes added from now on
// belong to the group, and so would one added at Handle.
func (c *componentHandler) WithGroup(name string) slog.Handler {
	h := c.h
	if c.set {
		h = h.WithAttrs([]slog.Attr{{Key: "component", Value: c.component}})
	}
	return &componentHandler{h: h.WithGroup(name)}
}
