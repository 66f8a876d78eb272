package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/previewgate/previewgate/auth"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/internal/testing/testkit"
	"github.com/previewgate/previewgate/sandboxmgr"
)

// publicDefaultEnv: the default template "site" is public, "priv" is not.
func publicDefaultEnv(t *testing.T) *dockerEnv {
	return newDockerEnv(t, func(c *config.Config) {
		app := c.Templates["app"]
		site, priv := *app, *app
		site.Name, site.Public = "site", true
		priv.Name = "priv"
		c.Templates = map[string]*config.Template{"site": &site, "priv": &priv}
		c.DefaultTemplate = "site"
	})
}

// anon requests path on sandbox id without any token, as an API client.
func (e *dockerEnv) anon(id, path string) (int, string, []byte) {
	e.t.Helper()
	resp := testkit.Request(e.t, e.srv, "GET", "sandbox-"+id+"."+testDomain, path, "")
	body, _ := io.ReadAll(resp.Body)
	var je struct{ Code string }
	json.Unmarshal(body, &je)
	return resp.StatusCode, je.Code, body
}

// TestDockerPublicDefaultKeepsPrivateSandboxPrivate (#21, 2): with a public
// default template, a sandbox made from a private template (through the
// API) stays private: its own template decides, never the default's. Its
// requests are counted under its own template.
func TestDockerPublicDefaultKeepsPrivateSandboxPrivate(t *testing.T) {
	t.Parallel()
	e := publicDefaultEnv(t)
	x := dockertest.UniqueID("priv")
	// What PUT /admin/sandboxes/x {"template":"priv"} does.
	if _, err := e.mgr.Ensure(t.Context(), x, e.cfg.Templates["priv"]); err != nil {
		t.Fatal(err)
	}
	if code, _, body := e.anon(x, "/"); code != http.StatusUnauthorized {
		t.Fatalf("anonymous request for a private sandbox under a public default: got %d %.200s, want 401", code, body)
	}
	wantStatus(t, e.get(x, "/"), 200)
	m := testkit.Scrape(t, e.metrics.Handler())
	if got := m[`previewgate_requests_total{code="2xx",template="priv"}`]; got != 1 {
		t.Errorf("requests counted under priv: got %v, want 1 (all: %v)", got, m)
	}
	if got := m[`previewgate_requests_total{code="2xx",template="site"}`]; got != 0 {
		t.Errorf("requests counted under the default site: got %v, want 0", got)
	}
	// A token naming another template does not change an existing
	// sandbox's policy either.
	tok := mintWithTemplate(t, e.cfg, x, "site")
	wantStatus(t, testkit.Request(t, e.srv, "GET", "sandbox-"+x+"."+testDomain, "/", tok), 200)
	if code, _, _ := e.anon(x, "/"); code != http.StatusUnauthorized {
		t.Fatalf("after a token with tpl=site: anonymous got %d, want 401", code)
	}
}

// TestDockerAnonymousNeverCreates (#21, 3): under a public template a
// request without a token reaches existing sandboxes, wakes a stopped one,
// but never creates one.
func TestDockerAnonymousNeverCreates(t *testing.T) {
	t.Parallel()
	e := publicDefaultEnv(t)
	y := dockertest.UniqueID("new")
	code, jcode, body := e.anon(y, "/")
	if code != http.StatusUnauthorized || jcode != "no_sandbox" {
		t.Fatalf("anonymous request for a new id: got %d %.200s, want 401 no_sandbox", code, body)
	}
	if n := len(e.containers(y)); n != 0 {
		t.Fatalf("anonymous request made %d containers, want 0", n)
	}

	z := dockertest.UniqueID("pub")
	wantStatus(t, e.get(z, "/"), 200) // created with a token
	if code, _, body := e.anon(z, "/"); code != 200 {
		t.Fatalf("anonymous request for an existing public sandbox: got %d %.200s, want 200", code, body)
	}
	c := e.onlyContainer(z)
	if err := e.cli.ContainerStop(context.Background(), c.ID, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitState(z, "exited", 20*time.Second)
	if code, _, body := e.anon(z, "/"); code != 200 {
		t.Fatalf("anonymous request for a stopped public sandbox: got %d %.200s, want 200 (woken)", code, body)
	}
	if got := e.onlyContainer(z); got.ID != c.ID {
		t.Fatalf("got container %s, want %s woken, not another", got.ID, c.ID)
	}
}

// mintWithTemplate mints a token for sandbox id with a "tpl" claim.
func mintWithTemplate(t *testing.T, cfg *config.Config, id, tpl string) string {
	t.Helper()
	tok, err := auth.Mint(cfg.Auth.Keys[0], auth.MintOptions{Subject: "tester", Sandbox: id, Template: tpl,
		Issuer: "test", Audience: cfg.Auth.Audience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestForeignMessage (#21, 4): a 409 for another scope's container names
// the scope and what to do; one not made by previewgate says so.
func TestForeignMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&sandboxmgr.ForeignError{Container: "previewgate-x", Scope: "pg-staging", Managed: true}, []string{`scope "pg-staging"`, "scope: pg-staging", "remove the container previewgate-x"}},
		{&sandboxmgr.ForeignError{Container: "previewgate-x", Managed: true}, []string{"another gateway's scope", "previewgate-x"}},
		{&sandboxmgr.ForeignError{Container: "previewgate-x", Scope: "pg-staging", Managed: true, Record: "previewgate-rec-x"},
			[]string{"remove the container previewgate-x and its record (the ConfigMap previewgate-rec-x)"}},
		{&sandboxmgr.ForeignError{Container: "previewgate-x"}, []string{"not made by previewgate"}},
	} {
		he := ensureError(context.Background(), fmt.Errorf("sandbox x: %w", tc.err))
		if he.Status != http.StatusConflict || he.Code != "foreign_container" {
			t.Errorf("got %d %s, want 409 foreign_container", he.Status, he.Code)
		}
		for _, w := range tc.want {
			if !strings.Contains(he.Msg, w) {
				t.Errorf("message %q lacks %q", he.Msg, w)
			}
		}
	}
}
