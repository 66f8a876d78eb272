package docker

import (
	"context"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/previewgate/previewgate/internal/dockerbuild"
)

// images is the engine's image store (Capabilities.Images).
type images struct{ e *Runtime }

func (i images) Build(ctx context.Context, tag string, buildContext []byte, labels map[string]string) error {
	return classify("build "+tag, dockerbuild.Build(ctx, i.e.cli, tag, buildContext, labels), nil)
}

func (i images) Has(ctx context.Context, tag string) (bool, error) { return i.e.hasImage(ctx, tag) }

func (e *Runtime) hasImage(ctx context.Context, tag string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, tag)
	if err == nil {
		return true, nil
	}
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return false, classify("inspect image "+tag, err, nil)
}
