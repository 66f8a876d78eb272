// Package e2e tests the built previewgate binary end to end.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// A Docker engine is served by one gateway per scope (DESIGN.md
// "Scale-out is Kubernetes"): of gateways started together with one scope,
// one serves and the others exit saying why; a second gateway on the same
// data dir is a standby that takes over when the first exits, with the
// settings and links the first one wrote; gateways starting together on a
// fresh engine leave one network; no record volume is ever made.

const adminToken = "e2e-admin-token-0123456789"

// gw is one gateway's config: a scope, a data dir, its listeners.
type gw struct {
	scope, dataDir, network, image string
	http, admin                    string // addresses
	file                           string
}

func newGW(t *testing.T, scope, dataDir, net, image string) *gw {
	g := &gw{scope: scope, dataDir: dataDir, network: net, image: image, http: freeAddr(t), admin: freeAddr(t)}
	g.file = filepath.Join(t.TempDir(), "previewgate.yaml")
	cfg := fmt.Sprintf(`domain: preview.localhost
scope: %s
data_dir: %q
admin_token: %s
listen: {http: %q, admin: %q}
docker: {network: %q}
auth:
  audience: previewgate
  issuers: [test]
  keys: [{kid: k1, alg: HS256, secret: "e2e-secret-e2e-secret-e2e-secret-0123"}]
default_template: app
templates:
  app: {image: %q, ready: {path: /, timeout: 20s}}
`, g.scope, g.dataDir, adminToken, g.http, g.admin, g.network, g.image)
	if err := os.WriteFile(g.file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a running gateway process.
type proc struct {
	cmd    *exec.Cmd
	stderr syncBuf
	done   chan struct{} // closed when it exited
	err    error         // its exit, once done
	exited time.Time
}

// start runs bin serve with g's config and the test labels (everything it
// makes is cleaned up with this test process's); it is stopped when t ends
// if still running: SIGTERM (it removes its scope lock), then SIGKILL.
func start(t *testing.T, bin string, g *gw) *proc {
	t.Helper()
	args := []string{"serve", "--config", g.file}
	for k, v := range dockertest.Labels() {
		args = append(args, "--label", k+"="+v)
	}
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "PREVIEWGATE_CONFIG=")
	p.cmd.Stdout = io.Discard
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.exited = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("gateway %d stderr:\n%s", p.cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

// waitLog waits until p's log says want (or p exits, or within passes).
func (p *proc) waitLog(t *testing.T, want string, within time.Duration) time.Time {
	t.Helper()
	for end := time.Now().Add(within); time.Now().Before(end); {
		if strings.Contains(p.stderr.String(), want) {
			return time.Now()
		}
		select {
		case <-p.done:
			if strings.Contains(p.stderr.String(), want) {
				return time.Now()
			}
			t.Fatalf("gateway exited (%v) before saying %q:\n%s", p.err, want, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("gateway did not say %q within %v:\n%s", want, within, p.stderr.String())
	return time.Time{}
}

// admin calls the admin API of g and decodes its JSON answer into out.
func (g *gw) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+g.admin+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// networksNamed counts the networks named exactly name.
func networksNamed(t *testing.T, name string) int {
	t.Helper()
	list, err := dockertest.Client(t).NetworkList(context.Background(), network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, nw := range list {
		if nw.Name == name {
			n++
		}
	}
	return n
}

// TestDockerOneGatewayPerScope: three gateways of one scope on different
// data dirs, started at once on a fresh network name: one serves, the two
// others exit non-zero saying why and pointing to Kubernetes, and one
// network is left, on which a sandbox is made. Then three gateways of
// three scopes, started at once on another fresh network name: all serve,
// and one network is left on which each makes its sandbox. Both used to
// leave three networks named alike and answer every create 502/503.
func TestDockerOneGatewayPerScope(t *testing.T) {
	t.Parallel()
	image := dockertest.TestAppImage(t)
	bin := buildBinary(t)

	t.Run("one scope", func(t *testing.T) {
		net := dockertest.Network(t)
		scope := "e2e-" + dockertest.RunID() + "-one"
		var gws []*gw
		var ps []*proc
		for range 3 {
			gws = append(gws, newGW(t, scope, t.TempDir(), net, image))
		}
		t0 := time.Now()
		for _, g := range gws {
			ps = append(ps, start(t, bin, g))
		}
		serving := -1
		for end := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
			exited := 0
			for i, p := range ps {
				select {
				case <-p.done:
					exited++
				default:
					if strings.Contains(p.stderr.String(), "previewgate serving") {
						serving = i
					}
				}
			}
			if serving >= 0 && exited == 2 {
				break
			}
			if exited == 3 || time.Now().After(end) {
				t.Fatalf("serving: gateway %d, exited: %d; want one serving and two exited", serving, exited)
			}
		}
		for i, p := range ps {
			if i == serving {
				continue
			}
			<-p.done
			msg := p.stderr.String()
			if p.err == nil || !strings.Contains(msg, "one gateway per scope") || !strings.Contains(msg, "docs/kubernetes.md") {
				t.Errorf("gateway %d: exit %v, want non-zero saying why (one gateway per scope) and pointing to docs/kubernetes.md:\n%s", i, p.err, msg)
			}
			t.Logf("gateway %d refused %v after the start: %s", i, p.exited.Sub(t0).Round(time.Millisecond), lastLine(msg))
		}
		select {
		case <-ps[serving].done:
			t.Fatalf("the serving gateway exited: %v", ps[serving].err)
		default:
		}
		id := "one-" + dockertest.RunID()
		if code := gws[serving].call(t, "PUT", "/admin/sandboxes/"+id, "", nil); code != 200 {
			t.Fatalf("PUT a sandbox through the serving gateway: got %d, want 200", code)
		}
		if n := networksNamed(t, net); n != 1 {
			t.Errorf("networks named %s: %d, want 1", net, n)
		}
	})

	t.Run("three scopes", func(t *testing.T) {
		net := dockertest.Network(t)
		var gws []*gw
		var ps []*proc
		for i := range 3 {
			gws = append(gws, newGW(t, fmt.Sprintf("e2e-%s-s%d", dockertest.RunID(), i), t.TempDir(), net, image))
		}
		for _, g := range gws {
			ps = append(ps, start(t, bin, g))
		}
		for _, p := range ps {
			p.waitLog(t, "previewgate serving", 2*time.Minute)
		}
		var wg sync.WaitGroup
		for i, g := range gws {
			wg.Go(func() {
				id := fmt.Sprintf("s%d-%s", i, dockertest.RunID())
				if code := g.call(t, "PUT", "/admin/sandboxes/"+id, "", nil); code != 200 {
					t.Errorf("PUT a sandbox through gateway %d: got %d, want 200", i, code)
				}
			})
		}
		wg.Wait()
		if n := networksNamed(t, net); n != 1 {
			t.Errorf("networks named %s: %d, want 1", net, n)
		}
	})
}

// TestDockerStandbyTakesOver: a second gateway on the same data dir (and
// the same config: the same ports) waits as a standby, saying so; stopped
// with SIGTERM, the first exits 0 and the standby serves within seconds,
// with the settings and the share link the first one wrote through the
// admin API. No previewgate-rec-* volume exists at any point.
func TestDockerStandbyTakesOver(t *testing.T) {
	t.Parallel()
	image := dockertest.TestAppImage(t)
	bin := buildBinary(t)
	g := newGW(t, "e2e-"+dockertest.RunID()+"-standby", t.TempDir(), dockertest.Network(t), image)

	first := start(t, bin, g)
	first.waitLog(t, "previewgate serving", 2*time.Minute)
	id := "standby-" + dockertest.RunID()
	if code := g.call(t, "PUT", "/admin/sandboxes/"+id, "", nil); code != 200 {
		t.Fatalf("PUT a sandbox: got %d, want 200", code)
	}
	if code := g.call(t, "PATCH", "/admin/sandboxes/"+id, `{"public":true}`, nil); code != 200 {
		t.Fatalf("PATCH public: got %d, want 200", code)
	}
	var link struct{ ID string }
	if code := g.call(t, "POST", "/admin/sandboxes/"+id+"/links", `{"ttl":"1h"}`, &link); code != 201 || link.ID == "" {
		t.Fatalf("POST a link: got %d %+v, want 201 and its id", code, link)
	}

	second := start(t, bin, g)
	second.waitLog(t, "standby: another gateway serves from data_dir", time.Minute)
	if strings.Contains(second.stderr.String(), "previewgate serving") {
		t.Fatal("the standby serves while the first gateway runs")
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-first.done
	if first.err != nil {
		t.Errorf("the first gateway's exit on SIGTERM: %v, want 0", first.err)
	}
	served := second.waitLog(t, "previewgate serving", 30*time.Second)
	took := served.Sub(first.exited)
	t.Logf("the standby served %v after the first gateway exited", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the standby took %v to serve after the first exited, want within seconds", took)
	}

	var info struct {
		PublicSetting *bool `json:"public_setting"`
		LiveLinks     int   `json:"live_links"`
	}
	if code := g.call(t, "GET", "/admin/sandboxes/"+id, "", &info); code != 200 || info.PublicSetting == nil || !*info.PublicSetting || info.LiveLinks != 1 {
		t.Errorf("after the takeover: %d public_setting %v live_links %d, want public true and the one link", code, info.PublicSetting, info.LiveLinks)
	}
	var links struct{ Links []struct{ ID string } }
	if code := g.call(t, "GET", "/admin/sandboxes/"+id+"/links", "", &links); code != 200 || len(links.Links) != 1 || links.Links[0].ID != link.ID {
		t.Errorf("links after the takeover: %d %+v, want the link %s", code, links, link.ID)
	}
	// Public: reachable without a token through the new gateway.
	req, _ := http.NewRequest("GET", "http://"+g.http+"/", nil)
	req.Host = "sandbox-" + id + ".preview.localhost"
	if resp, err := (&http.Client{Timeout: time.Minute}).Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("the public sandbox without a token after the takeover: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	// What the gateways made carries this test process's run label.
	f := filters.NewArgs(filters.Arg("name", "previewgate-rec-"), filters.Arg("label", dockertest.LabelRun+"="+dockertest.RunID()))
	vols, err := dockertest.Client(t).VolumeList(context.Background(), volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Volumes {
		t.Errorf("record volume %s exists, want none", v.Name)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// syncBuf is a log sink tests read while the process writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
