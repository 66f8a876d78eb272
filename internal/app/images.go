package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr/docker"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// startImageWorker runs prepareImages for reloaded configs, one at a time
// and off the reload path: a build must not hold the config watcher's
// lock (reloads, SIGHUP, admin PUT) for its minute, nor outlive serve's
// context. Of configs that arrive during a build, the newest is prepared
// next. close stops it and waits.
func (a *App) startImageWorker(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	a.imageWork = make(chan *config.Config, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-a.imageWork:
				bctx, bcancel := context.WithTimeout(ctx, time.Minute)
				a.prepareImages(bctx, c)
				bcancel()
			}
		}
	}()
	a.closers = append(a.closers, func() { cancel(); <-done })
}

// queueImages hands c to the image worker, replacing a config still
// waiting there.
func (a *App) queueImages(c *config.Config) {
	for {
		select {
		case a.imageWork <- c:
			return
		default:
		}
		select {
		case <-a.imageWork: // superseded
		default:
		}
	}
}

// prepareImages builds the demo image if a template runs it and the
// engine lacks it, then logs each template whose image the engine lacks:
// its sandboxes would fail at their first request (#16). /readyz names
// them too.
func (a *App) prepareImages(ctx context.Context, cfg *config.Config) {
	if usesDemoImage(cfg) {
		if err := ensureDemoImage(ctx, a.caps.Images, runtime.Shared(a.labels), a.log); err != nil {
			a.log.Warn("demo image not available", "err", err)
		}
	}
	missing, err := missingImages(a.caps.Images, sortedTemplates(cfg))
	if err != nil {
		a.log.Debug("template images not checked", "err", err)
	}
	for _, m := range missing {
		a.log.Warn("template image not found on the engine; its sandboxes cannot start", "template_image", m)
	}
}

// imagesToCheck lists the templates whose image must already be on the
// engine: all but those running the demo image, which serve builds.
func imagesToCheck(cfg *config.Config) []*config.Template {
	return slices.DeleteFunc(sortedTemplates(cfg), func(t *config.Template) bool { return t.Image == config.DemoImage })
}

// WarnMissingImages warns, without failing validation, about templates whose
// image the Docker engine lacks: their sandboxes could not start (#16).
func WarnMissingImages(cfg *config.Config, path string, stderr io.Writer) {
	if cfg.Runtime.Kind == config.RuntimeKubernetes {
		return // the kubelet pulls
	}
	rt, err := docker.New(docker.Options{Host: cfg.Docker.Host, DialTimeout: 2 * time.Second})
	if err != nil {
		return
	}
	defer rt.Close()
	missing, err := missingImages(rt.Capabilities().Images, imagesToCheck(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "%s: note: template images not checked: %v\n", path, err)
	}
	for _, m := range missing {
		fmt.Fprintf(stderr, "%s: warning: template %s is not on the Docker engine; its sandboxes cannot start\n", path, m)
	}
}

// missingImages returns "template: image" for each of tpls whose image the
// runtime does not have, in template order: a sandbox of such a template
// cannot start (the engine pulls nothing). A runtime without
// Capabilities.Images pulls its images itself: none are reported there.
// It asks for at most 5 s.
func missingImages(images runtime.Images, tpls []*config.Template) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []string
	for _, t := range tpls {
		if images == nil || t == nil || t.Image == "" {
			continue
		}
		ok, err := images.Has(ctx, t.Image)
		if err != nil {
			return out, fmt.Errorf("image %s: %w", t.Image, err)
		}
		if !ok {
			out = append(out, t.Name+": image "+t.Image)
		}
	}
	return out, nil
}
