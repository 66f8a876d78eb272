package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
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
	tag := hostImage(t) // built before the clock starts: its time is the machine's load
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	labels := dockertest.Labels()
	labels[dockertest.LabelTest] = "1"

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
	if !strings.Contains(out, "previewgate") || !strings.Contains(out, imageVersion) {
		t.Errorf("`previewgate version` in the image printed %q, want it to contain %q and %q", out, "previewgate", imageVersion)
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

// TestImageHealthCheckUsesConfig: the image's own HEALTHCHECK asks the
// admin listener the served config names, so a gateway whose
// listen.admin is not 127.0.0.1:9090 is healthy (#16: it always asked
// 127.0.0.1:9090).
func TestImageHealthCheckUsesConfig(t *testing.T) {
	c := dockertest.Client(t)
	tag := hostImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const cfg = `domain: preview.localhost
listen: {http: "127.0.0.1:8080", admin: "127.0.0.1:9191"}
data_dir: /var/lib/previewgate
auth:
  keys: [{kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}]
docker: {host: "unix:///nonexistent/docker.sock"}
templates:
  app: {image: app:1}
`
	labels := dockertest.Labels()
	// Test left empty keeps the image's check; only its pace is the test's.
	created, err := c.ContainerCreate(ctx, &container.Config{Image: tag, Labels: labels,
		Healthcheck: &container.HealthConfig{Interval: time.Second, Timeout: 5 * time.Second, Retries: 3}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true})
	})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "etc/previewgate/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "etc/previewgate/config.yaml", Mode: 0o644, Size: int64(len(cfg))})
	tw.Write([]byte(cfg))
	tw.Close()
	if err := c.CopyToContainer(ctx, created.ID, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		t.Fatalf("copy config: %v", err)
	}
	if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	for {
		ins, err := c.ContainerInspect(ctx, created.ID)
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if ins.State == nil || !ins.State.Running {
			t.Fatalf("gateway container stopped: %+v", ins.State)
		}
		if h := ins.State.Health; h != nil && h.Status != container.Starting {
			if h.Status != container.Healthy {
				var last string
				if n := len(h.Log); n > 0 {
					last = h.Log[n-1].Output
				}
				t.Fatalf("health %s, last check said %q; want healthy", h.Status, last)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no health verdict")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// imageVersion is the version the image's binary is built with.
const imageVersion = "imagetest-1"

var (
	hostImageOnce sync.Once
	hostImageTag  string
	hostImageErr  error
)

// hostImage builds the Dockerfile's runtime-host target from a binary
// built here (no registry needed), once per test process; dockertest's
// cleanup removes it with the run's other labelled objects.
func hostImage(t *testing.T) string {
	t.Helper()
	c := dockertest.Client(t)
	hostImageOnce.Do(func() { hostImageTag, hostImageErr = buildHostImage(t, c) })
	if hostImageErr != nil {
		t.Fatal(hostImageErr)
	}
	return hostImageTag
}

func buildHostImage(t *testing.T, c *client.Client) (string, error) {
	// A cold build compiles client-go and the Kubernetes API types too
	// (#15): minutes on two loaded cores.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "previewgate")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+imageVersion, "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	buildCtx, err := hostBuildContext("Dockerfile", bin, caBundle)
	if err != nil {
		return "", fmt.Errorf("build context: %w", err)
	}
	labels := dockertest.Labels()
	labels[dockertest.LabelTest] = "1"
	tag := "previewgate-imagetest:" + dockertest.RunID()
	resp, err := c.ImageBuild(ctx, bytes.NewReader(buildCtx), build.ImageBuildOptions{
		Tags: []string{tag}, Target: "runtime-host", Labels: labels, Remove: true, ForceRemove: true,
	})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	buildLog, err := readBuild(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("image build: %w\n%s", err, buildLog)
	}
	return tag, nil
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
