// Package k8stest runs a real Kubernetes control plane for tests: a
// kube-apiserver and an etcd server built from pinned releases (the module
// in ./build), started on loopback with certificates and tokens of their
// own, plus a node agent (agent.go) that stands in for the kubelet.
//
// Nothing here is used outside tests. Tests that need the control plane
// fail, never skip, when it cannot be built or started (#15).
//
// The binaries are built once per machine and cached under
// $(go env GOCACHE)/../previewgate-k8s/<key>, where key hashes the build
// module (go.mod, go.sum, etcd/main.go) and the Go version; a cold build of
// kube-apiserver takes several minutes on two cores, so .ci/run builds them
// before the tests (go run ./internal/testing/k8stest/prebuild).
package k8stest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Binaries are the paths of the built control-plane programs.
type Binaries struct {
	APIServer string
	Etcd      string
}

// buildDir is the build module's directory (next to this file).
func buildDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("k8stest: cannot locate source directory")
	}
	dir := filepath.Join(filepath.Dir(file), "build")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("k8stest: build module: %w", err)
	}
	return dir, nil
}

// cacheRoot is $(go env GOCACHE)/../previewgate-k8s: next to the build cache
// that CI machines keep, and removed with it.
func cacheRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	gocache := strings.TrimSpace(string(out))
	if gocache == "" || gocache == "off" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory: %w", err)
		}
		return filepath.Join(dir, "previewgate-k8s"), nil
	}
	return filepath.Join(filepath.Dir(gocache), "previewgate-k8s"), nil
}

func cacheKey(dir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "etcd/main.go"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("k8stest: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Build returns the cached binaries, building them first if needed. Several
// processes may call it at once (go test runs packages in parallel): a file
// lock makes one build and the others wait for it. In a test binary Start
// calls it once, for the control plane all tests share.
func Build(ctx context.Context, logf func(string, ...any)) (Binaries, error) {
	dir, err := buildDir()
	if err != nil {
		return Binaries{}, err
	}
	key, err := cacheKey(dir)
	if err != nil {
		return Binaries{}, err
	}
	root, err := cacheRoot(ctx)
	if err != nil {
		return Binaries{}, err
	}
	out := filepath.Join(root, key)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("k8stest: %w", err)
	}
	b := Binaries{APIServer: filepath.Join(out, "kube-apiserver"), Etcd: filepath.Join(out, "etcd")}
	if exists(b.APIServer) && exists(b.Etcd) {
		return b, nil
	}
	lock, err := os.OpenFile(filepath.Join(out, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Binaries{}, fmt.Errorf("k8stest: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Binaries{}, fmt.Errorf("k8stest: lock %s: %w", out, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	for _, p := range []struct{ bin, pkg string }{
		{b.Etcd, "./etcd"},
		{b.APIServer, "k8s.io/kubernetes/cmd/kube-apiserver"},
	} {
		if exists(p.bin) {
			continue // another process built it while we waited
		}
		t0 := time.Now()
		logf("k8stest: building %s into %s (a cold kube-apiserver build takes minutes)", p.pkg, out)
		tmp := p.bin + ".tmp"
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, p.pkg)
		cmd.Dir = dir
		// The build module is a module of its own; the caller's GOFLAGS
		// (e.g. -race from a test run) must not change what is built.
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Run(); err != nil {
			return Binaries{}, fmt.Errorf("k8stest: go build %s: %w\n%s", p.pkg, err, tail(stderr.String(), 4000))
		}
		if err := os.Rename(tmp, p.bin); err != nil {
			return Binaries{}, fmt.Errorf("k8stest: %w", err)
		}
		logf("k8stest: built %s in %s", p.pkg, time.Since(t0).Round(time.Second))
	}
	return b, nil
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
