package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/mgrtest"
)

// TestMain builds the binary once, before any test's clock starts (a
// build's time depends on the machine's load, and a deadline covering it
// failed CI), then runs the tests from the module root, where the
// repository's files they read are (docs/, deploy/, the Dockerfile,
// testdata/), and removes what they left in Docker.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "previewgate-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "previewgate")
	if binErr = compile(binary); binErr != nil {
		fmt.Fprintln(os.Stderr, "e2e:", binErr)
	}
	if docsExample, docsErr = compileDocsExample(dir); docsErr != nil {
		fmt.Fprintln(os.Stderr, "e2e:", docsErr)
	}
	defer os.RemoveAll(dir)
	dockertest.Main(m)
}

// binary is the previewgate binary the tests run, built by TestMain as
// the README and the Dockerfile build it; binErr says why there is none.
var (
	binary string
	binErr error
)

// binaryVersion is the version the binary is built with.
const binaryVersion = "e2etest-1"

// compile builds the binary as the Dockerfile does (static, so that the
// image test can put it into a FROM scratch image), with binaryVersion.
func compile(out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+binaryVersion, "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	return nil
}

// docsExample is docs/api.md's Go program, built by TestMain too;
// docsErr says why there is none.
var (
	docsExample string
	docsErr     error
)

// compileDocsExample builds docs/api.md's one ```go block as a program
// of this module (an overlay puts it at e2e/docsexample without writing
// into the tree), into dir.
func compileDocsExample(dir string) (string, error) {
	doc, err := os.ReadFile("docs/api.md")
	if err != nil {
		return "", err
	}
	blocks := fencedBlocks(doc, "go")
	if len(blocks) != 1 {
		return "", fmt.Errorf("docs/api.md: got %d ```go blocks, want 1", len(blocks))
	}
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	src, overlay := filepath.Join(dir, "example.go"), filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "e2e", "docsexample", "main.go"): src}})
	if err := errors.Join(os.WriteFile(src, blocks[0], 0o600), os.WriteFile(overlay, ov, 0o600)); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "docs-example")
	if b, err := exec.Command("go", "build", "-overlay", overlay, "-o", out, "./e2e/docsexample").CombinedOutput(); err != nil {
		return "", fmt.Errorf("docs/api.md's go example: go build: %v\n%s", err, b)
	}
	return out, nil
}

// buildBinary returns the binary TestMain built; the test fails if there
// is none.
func buildBinary(t *testing.T) string {
	t.Helper()
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binary
}

// labelArgs makes the gateway label what it creates, so the test cleans it up.
func labelArgs() []string {
	var args []string
	for k, v := range dockertest.Labels() {
		args = append(args, "--label", k+"="+v)
	}
	return args
}

// gatewayProc is a running previewgate process.
type gatewayProc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan error
}

// startProc starts bin in a directory of t's own, so that a default
// data_dir (./previewgate-data) never lands in the repository.
func startProc(t *testing.T, bin string, args ...string) *gatewayProc {
	t.Helper()
	return startProcIn(t, t.TempDir(), bin, args...)
}

// startProcIn starts bin in dir.
func startProcIn(t *testing.T, dir, bin string, args ...string) *gatewayProc {
	t.Helper()
	p := &gatewayProc{cmd: exec.Command(bin, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Dir = dir
	// Only --config picks the file: the developer's shell may set one.
	p.cmd.Env = append(os.Environ(), "PREVIEWGATE_CONFIG=")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// waitFor polls until the output matches re or the process exits.
func (p *gatewayProc) waitFor(t *testing.T, buf *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(buf.String()); m != nil {
			return m
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("gateway exited (%v) before printing %s", err, re)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("gateway did not print %s", re)
	return nil
}

// removeSandboxesAtEnd removes, when t ends, the containers of these
// sandbox ids that this test process made. Container names are global on
// the engine: a development gateway's "demo" left running would be a
// foreign container (409) to the next test's gateway. Register it before
// starting the gateway, so it runs after the gateway is gone.
func removeSandboxesAtEnd(t *testing.T, ids ...string) {
	cli := dockertest.Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, id := range ids {
			ctr, err := cli.ContainerInspect(ctx, mgrtest.ContainerOf(ctx, cli, id))
			if err != nil || ctr.Config == nil || ctr.Config.Labels[dockertest.LabelRun] != dockertest.RunID() {
				continue // none, or not ours
			}
			if err := cli.ContainerRemove(ctx, ctr.ID, container.RemoveOptions{Force: true}); err != nil {
				t.Errorf("remove sandbox %s: %v", id, err)
			}
		}
	})
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for a writer process and a reader test.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
