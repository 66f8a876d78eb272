// Package dockertest gives integration tests a Docker client, the testapp
// image and the labels that let everything they create be cleaned up.
//
// Everything a test creates in Docker must carry Labels(): previewgate.test=1
// plus a run id unique to this test process, so Cleanup removes exactly what
// this process made, even when several test binaries share the engine.
//
// Every package whose tests use Docker must clean up in TestMain:
//
//	func TestMain(m *testing.M) { dockertest.Main(m) }
//
// Main also stops the fixtures a test binary shares (AtExit): k8stest's
// control plane is started once per binary and stopped there.
//
// Tests that need Docker fail with "docker engine unreachable: ..." when the
// engine cannot be reached; under `go test -short` they are skipped. It
// never touches a Docker object without the labels of this test process.
package dockertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/internal/dockerbuild"
)

// Label keys set on everything tests create.
const (
	LabelTest = "previewgate.test"      // always "1"
	LabelRun  = "previewgate.test.run"  // unique per test process
	LabelCase = "previewgate.test.case" // unique per ScopedLabels call
)

var (
	runID   = newRunID()
	netSeq  atomic.Int64
	caseSeq atomic.Int64
	imgOnce sync.Once
	imgTag  string
	imgErr  error

	inMain atomic.Bool
	exitMu sync.Mutex // guards atExit
	atExit []func()
)

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ScopedLabels returns Labels plus a label of its own. A manager scoped by
// them sees only the containers it made: parallel tests' Start (which
// removes half-made containers and adopts pool ones) and reapers must not
// touch each other's sandboxes.
func ScopedLabels() map[string]string {
	l := Labels()
	l[LabelCase] = fmt.Sprintf("%s-%d", runID, caseSeq.Add(1))
	return l
}

// RunID identifies this test process in labels and names.
func RunID() string { return runID }

// Labels returns a fresh copy of the labels every test object carries.
func Labels() map[string]string {
	return map[string]string{LabelTest: "1", LabelRun: runID}
}

// NewClient connects to the engine from the environment (DOCKER_HOST or the
// default socket) with API version negotiation: the engine may be older than
// the SDK.
func NewClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// Client returns a client whose engine answered a ping. It fails t with
// "docker engine unreachable: ..." otherwise, and skips t under -short.
func Client(t testing.TB) *client.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Docker engine; skipped with -short")
	}
	c, err := NewClient()
	if err != nil {
		t.Fatalf("docker engine unreachable: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("docker engine unreachable: %v (is dockerd running and DOCKER_HOST right?)", err)
	}
	return c
}

// Network returns a network name unique to t. The network itself is created
// by whoever needs it (the sandbox manager does); when t ends, every container
// of this run attached to it is removed, then the network.
func Network(t testing.TB) string {
	t.Helper()
	c := Client(t)
	name := fmt.Sprintf("pgtest-%s-%d", runID, netSeq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f := runFilter()
		f.Add("network", name)
		if err := removeContainers(ctx, c, f); err != nil {
			t.Errorf("cleanup network %s: %v", name, err)
		}
		if err := c.NetworkRemove(ctx, name); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cleanup network %s: %v", name, err)
		}
	})
	return name
}

// TestAppImage builds testdata/testapp into a FROM scratch image once per
// test process and returns its tag.
func TestAppImage(t testing.TB) string {
	t.Helper()
	c := Client(t)
	imgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		imgTag = "previewgate-testapp:" + runID
		imgErr = dockerbuild.GoProgram(ctx, c, "./testdata/testapp", imgTag, 3000, Labels())
	})
	if imgErr != nil {
		t.Fatalf("build testapp image: %v", imgErr)
	}
	return imgTag
}

// Main runs the tests, stops what AtExit registered, removes what this
// process created in Docker and exits. Call it from TestMain of every
// package whose tests use Docker. An interrupt (Ctrl-C, a CI timeout's
// SIGTERM) also cleans up before exiting.
func Main(m *testing.M) {
	inMain.Store(true)
	exit := func(code int) {
		runAtExit()
		if err := Cleanup(); err != nil {
			fmt.Fprintf(os.Stderr, "dockertest cleanup: %v\n", err)
		}
		os.Exit(code)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		exit(1)
	}()
	code := m.Run()
	signal.Stop(sig)
	exit(code)
}

// AtExit registers f to run once when the tests of this binary end (or
// on an interrupt), before Main's Docker cleanup; fixtures shared by all
// tests of a binary stop there, since no single test owns them. It
// reports false when Main does not run the tests: nothing would call f.
func AtExit(f func()) bool {
	if !inMain.Load() {
		return false
	}
	exitMu.Lock()
	defer exitMu.Unlock()
	atExit = append(atExit, f)
	return true
}

// runAtExit runs the AtExit functions, last registered first, once each.
func runAtExit() {
	exitMu.Lock()
	fs := atExit
	atExit = nil
	exitMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// Cleanup removes every container, network, volume and image labelled with
// this process's run id. It does nothing if the engine is unreachable.
func Cleanup() error {
	c, err := NewClient()
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		return nil
	}
	f := runFilter()
	errs := []error{removeContainers(ctx, c, f)}
	nets, err := c.NetworkList(ctx, network.ListOptions{Filters: f})
	errs = append(errs, err)
	for _, n := range nets {
		if err := c.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	vols, err := c.VolumeList(ctx, volume.ListOptions{Filters: f})
	errs = append(errs, err)
	for _, v := range vols.Volumes {
		if err := c.VolumeRemove(ctx, v.Name, true); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	imgs, err := c.ImageList(ctx, image.ListOptions{All: true, Filters: f})
	errs = append(errs, err)
	for _, im := range imgs {
		_, err := c.ImageRemove(ctx, im.ID, image.RemoveOptions{Force: true, PruneChildren: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func runFilter() filters.Args {
	return filters.NewArgs(filters.Arg("label", LabelTest+"=1"), filters.Arg("label", LabelRun+"="+runID))
}

func removeContainers(ctx context.Context, c *client.Client, f filters.Args) error {
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return err
	}
	var errs []error
	for _, ct := range list {
		err := c.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
