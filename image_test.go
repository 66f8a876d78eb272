package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/previewgate/previewgate/internal/dockertest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// caBundle is staged into the image when the host has it: ACME talks to
// public CAs and scratch has no roots of its own.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// TestImageFromHostBinary builds the Dockerfile's runtime-host target from a
// binary built here (no registry needed), then runs `previewgate version` in
// it through the engine (issue 8, done-means 3).
func TestImageFromHostBinary(t *testing.T) {
	c := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	const version = "imagetest-1"
	bin := filepath.Join(t.TempDir(), "previewgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	buildCtx, err := hostBuildContext("Dockerfile", bin, caBundle)
	if err != nil {
		t.Fatalf("build context: %v", err)
	}

	labels := dockertest.Labels()
	labels[dockertest.LabelTest] = "1"
	tag := "previewgate-imagetest:" + dockertest.RunID()
	resp, err := c.ImageBuild(ctx, bytes.NewReader(buildCtx), build.ImageBuildOptions{
		Tags: []string{tag}, Target: "runtime-host", Labels: labels, Remove: true, ForceRemove: true,
	})
	if err != nil {
		t.Fatalf("image build: %v", err)
	}
	t.Cleanup(func() { removeImage(t, c, tag) })
	buildLog, err := readBuild(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("image build: %v\n%s", err, buildLog)
	}

	img, err := c.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("inspect %s: %v", tag, err)
	}
	if got, want := img.Config.User, "65532:65532"; got != want {
		t.Errorf("image user: got %q, want %q", got, want)
	}
	if hc := img.Config.Healthcheck; hc == nil || len(hc.Test) < 2 || hc.Test[1] != "/previewgate" {
		t.Errorf("image health check: got %+v, want one running /previewgate", hc)
	}
	if got := img.Config.Entrypoint; len(got) != 1 || got[0] != "/previewgate" {
		t.Errorf("image entrypoint: got %q, want [/previewgate]", got)
	}

	id, out := runOnce(ctx, t, c, tag, labels, "version")
	if !strings.Contains(out, "previewgate") || !strings.Contains(out, version) {
		t.Errorf("`previewgate version` in the image printed %q, want it to contain %q and %q", out, "previewgate", version)
	}

	// The binary stays root-owned (the non-root gateway cannot replace it);
	// the data dir belongs to the gateway's user.
	owners := fileOwners(ctx, t, c, id)
	for path, want := range map[string]int{"previewgate": 0, "var/lib/previewgate/": 65532} {
		if got, ok := owners[path]; !ok || got != want {
			t.Errorf("owner of /%s: got %d (present %v), want %d", path, got, ok, want)
		}
	}
	if _, err := os.Stat(caBundle); err == nil {
		if _, ok := owners[strings.TrimPrefix(caBundle, "/")]; !ok {
			t.Errorf("%s missing from the image", caBundle)
		}
	}
}

// fileOwners lists the container's files with their owner uid.
func fileOwners(ctx context.Context, t *testing.T, c *client.Client, id string) map[string]int {
	t.Helper()
	rc, err := c.ContainerExport(ctx, id)
	if err != nil {
		t.Fatalf("export container: %v", err)
	}
	defer rc.Close()
	owners := map[string]int{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return owners
		}
		if err != nil {
			t.Fatalf("read container export: %v", err)
		}
		owners[h.Name] = h.Uid
	}
}

// hostBuildContext is the tar context of the runtime-host target: the
// Dockerfile, rootfs/previewgate, rootfs/etc/ssl/certs/ca-certificates.crt
// when ca exists, and an empty data/ directory.
func hostBuildContext(dockerfile, bin, ca string) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		src  string // file to read; "" for a directory
	}
	entries := []entry{
		{"Dockerfile", 0o644, dockerfile},
		{"rootfs/", 0o755, ""},
		{"rootfs/previewgate", 0o755, bin},
		{"data/", 0o755, ""},
	}
	if _, err := os.Stat(ca); err == nil {
		entries = append(entries,
			entry{"rootfs/etc/", 0o755, ""}, entry{"rootfs/etc/ssl/", 0o755, ""},
			entry{"rootfs/etc/ssl/certs/", 0o755, ""}, entry{"rootfs/etc/ssl/certs/ca-certificates.crt", 0o644, ca})
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if e.src == "" {
			if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeDir}); err != nil {
				return nil, err
			}
			continue
		}
		data, err := os.ReadFile(e.src)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// runOnce runs image with args to completion and returns the container's
// id (removed when t ends) and its output.
func runOnce(ctx context.Context, t *testing.T, c *client.Client, img string, labels map[string]string, args ...string) (id, stdout string) {
	t.Helper()
	created, err := c.ContainerCreate(ctx, &container.Config{Image: img, Cmd: args, Labels: labels},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container: %v", err)
		}
	})
	waitC, errC := c.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	select {
	case res := <-waitC:
		if res.StatusCode != 0 {
			t.Errorf("container exited %d, want 0", res.StatusCode)
		}
	case err := <-errC:
		t.Fatalf("wait for container: %v", err)
	}
	logs, err := c.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("container logs: %v", err)
	}
	defer logs.Close()
	var out, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &stderr, logs); err != nil {
		t.Fatalf("read container logs: %v", err)
	}
	if stderr.Len() > 0 {
		t.Logf("container stderr: %s", stderr.String())
	}
	return created.ID, out.String()
}

// readBuild reads the build's JSON stream to its end; a failed build still
// answers 200 and reports the error in the stream.
func readBuild(r io.Reader) (string, error) {
	var log strings.Builder
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return log.String(), nil
		} else if err != nil {
			return log.String(), err
		}
		log.WriteString(msg.Stream)
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return log.String(), errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return log.String(), errors.New(msg.Error)
		}
	}
}

func removeImage(t *testing.T, c *client.Client, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.ImageRemove(ctx, tag, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Errorf("remove image %s: %v", tag, err)
	}
}
