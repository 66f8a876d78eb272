// Package dockerbuild builds images through the Docker Engine API without a
// registry: a tar build context sent to the engine's image build, and a
// static Go program of this module packed into a FROM scratch image (the
// test app that integration tests and the bench run in containers). It
// never pulls: a build that needs a registry fails.
package dockerbuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// Build builds tag from a tar build context with a Dockerfile at its root,
// labelled with labels, and waits for the build to finish. A failed build
// answers 200 with the error in its message stream; Build returns it.
func Build(ctx context.Context, cli *client.Client, tag string, buildContext []byte, labels map[string]string) error {
	return buildImage(ctx, cli, tag, buildContext, labels, false)
}

func buildImage(ctx context.Context, cli *client.Client, tag string, buildContext []byte, labels map[string]string, noCache bool) error {
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(buildContext), build.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		NoCache:     noCache,
		Labels:      labels,
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer resp.Body.Close()
	if err := ReadStream(resp.Body); err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	return nil
}

// ReadStream reads a build's JSON message stream to its end and returns the
// first error message in it.
func ReadStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		err := dec.Decode(&msg)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read build output: %w", err)
		}
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

// File is a file of a build context.
type File struct {
	Name string
	Mode int64
	Data []byte
}

// Context is a tar build context holding files.
func Context(files ...File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// GoProgram builds the module's package pkg (e.g. "./testdata/testapp")
// statically and packs it into a FROM scratch image tag that runs it and
// exposes port.
func GoProgram(ctx context.Context, cli *client.Client, pkg, tag string, port int, labels map[string]string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "previewgate-build")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := filepath.Base(pkg)
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nEXPOSE %d\nENTRYPOINT [\"/%s\"]\n", name, name, port, name)
	tarball, err := Context(File{"Dockerfile", 0o644, []byte(dockerfile)}, File{name, 0o755, exe})
	if err != nil {
		return err
	}
	// Without the build cache: the same program built by two processes at
	// once (test packages run in parallel) would share the cached steps'
	// images, and the first to remove its image with its parents (its
	// cleanup) pulls them from under the other's build ("failed to get
	// digest", CI of 2026-11-27). A COPY of one binary costs nothing to
	// redo.
	return buildImage(ctx, cli, tag, tarball, labels, true)
}

// ModuleRoot is the directory of this module's go.mod.
func ModuleRoot() (string, error) {
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		if mod := strings.TrimSpace(string(out)); mod != "" && mod != os.DevNull {
			return filepath.Dir(mod), nil
		}
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the previewgate module root (run from inside it)")
	}
	return filepath.Join(filepath.Dir(file), "..", ".."), nil
}
