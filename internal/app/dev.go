package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/demoapp"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The development default's helpers: the printed URL, the demo image, the
// per-data-dir instance label, and image checks shared with config validate.

// printDevURL says how to open the development default's demo preview
// and its admin page.
func (a *App) printDevURL(w io.Writer) {
	cfg := a.cfg
	_, port, _ := net.SplitHostPort(cfg.Listen.HTTP)
	tok, err := auth.Mint(cfg.Auth.Keys[0], auth.MintOptions{Subject: "dev", Sandbox: "demo",
		Issuer: cfg.Auth.Issuers[0], Audience: cfg.Auth.Audience, TTL: 12 * time.Hour})
	if err != nil {
		fmt.Fprintln(w, "cannot mint a development token:", err)
		return
	}
	fmt.Fprintf(w, "\nOpen the demo preview (token valid 12h):\n\n  http://sandbox-demo.%s:%s/?access_token=%s\n\n", cfg.Domains[0], port, tok)
	fmt.Fprintf(w, "Another sandbox: %s token mint --sandbox ID (in this directory: it signs with the\ndevelopment key kept in %s, so tokens and links survive a restart)\n\n",
		a.invoked, filepath.Join(cfg.DataDir, DevKeyFile))
	fmt.Fprintf(w, "Admin page on %s/ui/ (this run's admin token: %s)\n\n", listenURL("http", cfg.Listen.Admin, ""), string(cfg.AdminToken))
}

// usesDemoImage reports whether a template runs the demo image: the
// development default's and the starter config's (config init) do.
func usesDemoImage(c *config.Config) bool {
	for _, t := range c.Templates {
		if t.Image == config.DemoImage {
			return true
		}
	}
	return false
}

// errPulls: the runtime pulls its images (Kubernetes); it builds none.
var errPulls = errors.New("this runtime pulls its images from a registry and cannot build one; push the image where the cluster pulls from")

// ensureDemoImage builds the demo template's image from this very binary
// when the engine does not have it yet, labelled with labels.
func ensureDemoImage(ctx context.Context, images runtime.Images, labels map[string]string, log *slog.Logger) error {
	if images == nil {
		return fmt.Errorf("build %s: %w", config.DemoImage, errPulls)
	}
	ok, err := images.Has(ctx, config.DemoImage)
	if err != nil || ok {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	tarball, err := demoapp.BuildContext(exe)
	if err != nil {
		return err
	}
	log.Info("building demo image", "image", config.DemoImage)
	return images.Build(ctx, config.DemoImage, tarball, labels)
}

// devInstanceID returns the id kept in dataDir/instance-id, making it on
// first use: the development default labels its containers with it, so it
// adopts only what it made from this data dir (a restart keeps its
// sandboxes), and two of them on one engine never touch each other's.
func devInstanceID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "instance-id")
	read := func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("instance id: %w", err)
		}
		id := strings.TrimSpace(string(b))
		if id == "" || strings.Trim(id, "0123456789abcdef") != "" {
			return "", fmt.Errorf("instance id in %s: want lowercase hex, got %q (remove the file to make a new one)", path, id)
		}
		return id, nil
	}
	return keepOnce(path, "instance id", read, func() (string, []byte) {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		return id, []byte(id + "\n")
	})
}

// sortedTemplates lists cfg's templates by name.
func sortedTemplates(cfg *config.Config) []*config.Template {
	names := slices.Sorted(maps.Keys(cfg.Templates))
	out := make([]*config.Template, 0, len(names))
	for _, n := range names {
		out = append(out, cfg.Templates[n])
	}
	return out
}
