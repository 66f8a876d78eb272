package cli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/previewgate/previewgate/admin"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// pipeListener is a net.Listener whose connections are in-memory pipes,
// so an HTTP exchange runs inside a synctest bubble (fake time).
type pipeListener struct {
	conns     chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9090} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slowSandboxes never gets a sandbox ready: a wake waits until the API
// gives up on it. Its sandboxes are of template app.
type slowSandboxes struct{ admin.Sandboxes }

func (slowSandboxes) Get(_ context.Context, id string) (sandboxmgr.Info, error) {
	return sandboxmgr.Info{ID: id, Template: "app", State: "paused"}, nil
}

func (slowSandboxes) EnsureWith(ctx context.Context, _ string, _ *config.Template, _ sandboxmgr.Options) (sandboxmgr.Endpoint, error) {
	<-ctx.Done()
	return sandboxmgr.Endpoint{}, ctx.Err()
}

func (slowSandboxes) Resume(ctx context.Context, _ string) (sandboxmgr.Endpoint, error) {
	<-ctx.Done()
	return sandboxmgr.Endpoint{}, ctx.Err()
}

// TestSandboxesWaitAsLongAsTheAPI: up and resume wait as long as the
// admin API does and print its answer, 504 not_ready, rather than give
// up first (the CLI walk: resume gave up after 2 min while the API waited
// 5, and up after 30 min whatever the template's ready timeout); the API
// waits the template's ready timeout plus 30 s for both (resume waited a
// fixed 5 min). The real
// admin handler answers over in-memory pipes in fake time; only the
// sandboxes never get ready.
func TestSandboxesWaitAsLongAsTheAPI(t *testing.T) {
	t.Setenv(adminEnv, "")
	t.Setenv(configEnv, "")
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration // when the API gives up
	}{
		// The template's ready timeout plus the API's 30 s.
		{"resume", []string{"resume", "abc"}, 45*time.Minute + 30*time.Second},
		{"up", []string{"up", "abc"}, 45*time.Minute + 30*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := config.Default()
				cfg.AdminToken = cliAdminToken
				cfg.DefaultTemplate = "app"
				cfg.Templates = map[string]*config.Template{"app": {Image: "app:1", Ready: config.Ready{Timeout: config.Duration(45 * time.Minute)}}}
				l := newPipeListener()
				srv := &http.Server{Handler: admin.New(admin.Options{Config: func() *config.Config { return cfg }, Sandboxes: slowSandboxes{}})}
				served := make(chan error, 1)
				go func() { served <- srv.Serve(l) }()
				defer func() {
					srv.Close()
					if err := <-served; !errors.Is(err, http.ErrServerClosed) {
						t.Errorf("serve: %v", err)
					}
				}()
				dial := dialAdmin
				dialAdmin = l.dial
				defer func() { dialAdmin = dial }()

				t0 := time.Now()
				code, _, errs := cli(append([]string{"sandboxes"}, append(tc.args, "--admin", "127.0.0.1:9090", "--token", cliAdminToken)...)...)
				took := time.Since(t0)
				if code != 1 || !strings.Contains(errs, "(not_ready)") || took < tc.want {
					t.Errorf("%s: exit %d after %s, stderr %q; want 1 and the API's not_ready after %s", tc.name, code, took, errs, tc.want)
				}
			})
		})
	}
}
