package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
	"github.com/previewgate/previewgate/records"
)

// cliLinks: set, link, link ls and link rm against the running gateway
// of TestSandboxesCLI, whose sandbox id runs; the minted URL opens the
// preview with nothing else, and stops once revoked.
func cliLinks(t *testing.T, id, adminAddr string) {
	t.Helper()
	c := dockertest.Client(t)
	t.Cleanup(func() { // what a failed run left: this process's records only
		f := filters.NewArgs(filters.Arg("label", dockertest.LabelRun+"="+dockertest.RunID()), filters.Arg("label", records.LabelRecord))
		if vols, err := c.VolumeList(context.Background(), volume.ListOptions{Filters: f}); err == nil {
			for _, v := range vols.Volumes {
				_ = c.VolumeRemove(context.Background(), v.Name, true)
			}
		}
	})
	flags := []string{"--admin", adminAddr, "--token", cliAPIToken}
	code, out, errs := cli(append([]string{"sandboxes", "set", id, "--public", "true", "--keep-up", "1h"}, flags...)...)
	if code != 0 || !strings.Contains(out, "public true (its own setting), kept up until ") {
		t.Fatalf("set: exit %d %q %s", code, out, errs)
	}
	if code, _, errs := cli(append([]string{"sandboxes", "set", id, "--keep-up", "100h"}, flags...)...); code != 1 || !strings.Contains(errs, "max_keep_up") {
		t.Errorf("set past max_keep_up: exit %d %q, want 1 and the API's reason", code, errs)
	}
	if code, out, errs := cli(append([]string{"sandboxes", "set", id, "--public", "default", "--json"}, flags...)...); code != 0 || !strings.Contains(out, `"public":false`) {
		t.Errorf("set --public default --json: exit %d %q %s", code, out, errs)
	}

	code, out, errs = cli(append([]string{"sandboxes", "link", id, "--ttl", "10m", "--path", "/docs"}, flags...)...)
	m := regexp.MustCompile(`(?m)^link (l[0-9a-f]{12}) for port 3000, path /docs, expires .*\n(http://\S+)$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("link: exit %d %q %s", code, out, errs)
	}
	lid, link := m[1], m[2]
	if status, loc := openLink(t, link); status != http.StatusSeeOther || loc != "/docs" {
		t.Errorf("open the link: got %d to %q, want 303 to /docs", status, loc)
	}
	code, out, _ = cli(append([]string{"sandboxes", "link", "ls", id}, flags...)...)
	if code != 0 || !regexp.MustCompile(`(?m)^LINK +PORT +PATH +CREATED +EXPIRES +STATE\n`+lid+` +3000 +/docs +.* valid$`).MatchString(out) {
		t.Errorf("link ls: exit %d\n%s", code, out)
	}
	code, out, _ = cli(append([]string{"sandboxes", "link", "ls", id, "--json"}, flags...)...)
	var ls struct{ Links []map[string]any }
	if err := json.Unmarshal([]byte(out), &ls); code != 0 || err != nil || len(ls.Links) != 1 || strings.Contains(out, link[strings.Index(link, "=")+1:]) {
		t.Errorf("link ls --json: exit %d %q, want one link and no secret", code, out)
	}
	if code, out, errs := cli(append([]string{"sandboxes", "link", "rm", id, lid}, flags...)...); code != 0 || out != "link "+lid+" of sandbox "+id+" revoked\n" {
		t.Errorf("link rm: exit %d %q %s", code, out, errs)
	}
	if status, _ := openLink(t, link); status != http.StatusGone {
		t.Errorf("a revoked link: got %d, want 410", status)
	}
	if code, _, errs := cli(append([]string{"sandboxes", "link", "rm", id, "lnope"}, flags...)...); code != 1 || !strings.Contains(errs, "no such link") {
		t.Errorf("link rm of an unknown link: exit %d %q", code, errs)
	}
}

// openLink GETs a share link URL (its host a *.localhost name, dialled on
// loopback) and returns the status and Location.
func openLink(t *testing.T, link string) (int, string) {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", u.Port()))
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(link)
	if err != nil {
		t.Fatalf("GET %s: %v", link, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}
