package admin_test

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/config"
	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// TestAdminConfigBomb: the nesting bomb of #13 (200 KB of "[", which took
// 68 s and 15 GB) is refused by validate and by PUT with FILE:LINE:COL,
// cheaply, and changes nothing. Not parallel: it measures allocation.
func TestAdminConfigBomb(t *testing.T) {
	l := newLiveConfig(t, noSandboxes{}, testkit.ConfigFile(nil))
	live := l.store.Load()
	bomb := []byte(strings.Repeat("[", 200_000))
	for _, c := range []struct{ method, path string }{
		{"POST", "/admin/config/validate"},
		{"PUT", "/admin/config"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp, body := adminDo(t, l.admin, c.method, c.path, testkit.AdminToken, bomb)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
			t.Errorf("%s %s: got %d MiB allocated, want at most 64 MiB", c.method, c.path, got>>20)
		}
		want := l.path + ":1:33: lists and mappings nested more than 32 levels deep"
		if resp.StatusCode != 400 || !strings.Contains(string(body), want) {
			t.Errorf("%s %s: got %d %.300s, want 400 with %q", c.method, c.path, resp.StatusCode, body, want)
		}
	}
	if l.store.Load() != live {
		t.Errorf("the live config changed")
	}
}

// TestAdminConfigRoundTrip: GET /admin/config shows no secret and no env
// value, and sending its output back with PUT applies it unchanged: the
// REDACTED markers keep the running values, in the live config and in the
// file (#13; before, the PUT failed with "admin_token is too short").
func TestAdminConfigRoundTrip(t *testing.T) {
	t.Parallel()
	const dbURL = "postgres://app:hunter2-db-password@db/app"
	content := strings.Replace(testkit.ConfigFile(nil), "app: {image: testapp}",
		`app: {image: testapp, env: {DATABASE_URL: "`+dbURL+`", NODE_ENV: development-mode}}`, 1)
	l := newLiveConfig(t, noSandboxes{}, content)
	hidden := []string{testkit.AdminToken, testkit.Secret, dbURL, "development-mode"}

	resp, shown := adminDo(t, l.admin, "GET", "/admin/config", testkit.AdminToken, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET: got %d %s", resp.StatusCode, shown)
	}
	for _, v := range hidden {
		if strings.Contains(string(shown), v) {
			t.Errorf("GET shows %q:\n%s", v, shown)
		}
	}
	if resp, body := adminDo(t, l.admin, "POST", "/admin/config/validate", testkit.AdminToken, shown); resp.StatusCode != 200 {
		t.Errorf("validate the GET output: got %d %s, want 200", resp.StatusCode, body)
	}
	resp, body := adminDo(t, l.admin, "PUT", "/admin/config", testkit.AdminToken, shown)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"restart_needed":[]`) {
		t.Fatalf("PUT the GET output: got %d %s, want 200 with no restart", resp.StatusCode, body)
	}
	check := func(when string) {
		c := l.store.Load()
		env := c.Templates["app"].Env
		if string(c.AdminToken) != testkit.AdminToken || string(c.Auth.Keys[0].Secret) != testkit.Secret ||
			env["DATABASE_URL"] != dbURL || env["NODE_ENV"] != "development-mode" {
			t.Errorf("%s: got admin_token %d bytes, secret %d bytes, env %q; want the original values",
				when, len(c.AdminToken), len(c.Auth.Keys[0].Secret), env)
		}
	}
	check("after PUT")
	file, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(file), config.Redacted) {
		t.Errorf("the file keeps REDACTED:\n%s", file)
	}
	if err := l.watcher.Reload(); err != nil {
		t.Fatalf("reload of the written file: %v", err)
	}
	check("after reloading the file")
	if resp, again := adminDo(t, l.admin, "GET", "/admin/config", testkit.AdminToken, nil); resp.StatusCode != 200 || string(again) != string(shown) {
		t.Errorf("GET after the round trip: got %d\n%s\nwant\n%s", resp.StatusCode, again, shown)
	}
}

// someImages has only the images in has.
type someImages struct {
	noSandboxes
	has map[string]bool
}

func (s someImages) Has(_ context.Context, tag string) (bool, error) { return s.has[tag], nil }

// TestAdminPutConfigWarnsAndNamesChanges: PUT /admin/config applies a
// config whose template image is missing, and says so in warnings; its
// answer lists exactly the changed keys (#24, 3: it answered 200 in
// silence, and a round trip listed keys that had not changed). Validate
// says the same without applying.
func TestAdminPutConfigWarnsAndNamesChanges(t *testing.T) {
	t.Parallel()
	l := newLiveConfig(t, someImages{has: map[string]bool{"testapp": true}}, testkit.ConfigFile(nil))
	do := func(method, path string, body []byte, answer any) {
		t.Helper()
		resp, b := adminDo(t, l.admin, method, path, testkit.AdminToken, body)
		if resp.StatusCode != 200 || json.Unmarshal(b, answer) != nil {
			t.Fatalf("%s %s: got %d %s, want 200", method, path, resp.StatusCode, b)
		}
	}
	_, shown := adminDo(t, l.admin, "GET", "/admin/config", testkit.AdminToken, nil)
	var a adminapi.ConfigApplied
	if do("PUT", "/admin/config", shown, &a); len(a.Changed) != 0 || len(a.Warnings) != 0 {
		t.Errorf("round trip: got changed %q warnings %q, want none", a.Changed, a.Warnings)
	}
	next := []byte(testkit.ConfigFile(nil) + "  ghost: {image: \"ghost:1\"}\nlimits: {websockets_per_ip: 7}\n")
	next = []byte(strings.Replace(string(next), "trusted_proxies: [192.0.2.0/24]\n", "", 1) + "trusted_proxies: [192.0.2.0/24]\n")
	var v adminapi.ConfigValidation
	if do("POST", "/admin/config/validate", next, &v); !v.Valid || !slices.Contains(v.Warnings, "templates.ghost: image ghost:1 is not on the engine; its sandboxes cannot start until it is built or pulled") {
		t.Errorf("validate: got %+v, want valid with the missing image warned", v)
	}
	a = adminapi.ConfigApplied{}
	do("PUT", "/admin/config", next, &a)
	if want := []string{"limits.websockets_per_ip", "templates.ghost"}; !a.Applied || !slices.Equal(a.Changed, want) {
		t.Errorf("PUT: got applied %v changed %q, want %q", a.Applied, a.Changed, want)
	}
	if len(a.Warnings) != 1 || !strings.Contains(a.Warnings[0], "ghost:1 is not on the engine") {
		t.Errorf("PUT: got warnings %q, want the missing image", a.Warnings)
	}
	if l.store.Load().Templates["ghost"] == nil {
		t.Error("PUT with a warning was not applied")
	}
}

// TestAdminConfigKeepsTheFile: GET /admin/config is the file as written
// (comments and layout kept, secrets REDACTED), and a GET -> PUT round
// trip leaves the file byte for byte as it was, with nothing changed in
// the answer (#24, 2: it became a dump without comments).
func TestAdminConfigKeepsTheFile(t *testing.T) {
	t.Parallel()
	content := "# previews for the team\n" + strings.Replace(testkit.ConfigFile(nil), "templates:\n", "templates:   # one per stack\n", 1)
	l := newLiveConfig(t, noSandboxes{}, content)
	resp, shown := adminDo(t, l.admin, "GET", "/admin/config", testkit.AdminToken, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(shown), "# previews for the team\n") ||
		!strings.Contains(string(shown), "templates:   # one per stack\n") || strings.Contains(string(shown), testkit.AdminToken) {
		t.Fatalf("GET: got %d\n%s\nwant the file with its comments, no secret", resp.StatusCode, shown)
	}
	resp, body := adminDo(t, l.admin, "PUT", "/admin/config", testkit.AdminToken, shown)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"changed":[]`) {
		t.Fatalf("PUT: got %d %s, want 200 with nothing changed", resp.StatusCode, body)
	}
	if file, _ := os.ReadFile(l.path); string(file) != content {
		t.Errorf("round trip: file is\n%s\nwant it unchanged:\n%s", file, content)
	}
	edited := strings.Replace(string(shown), "app: {image: testapp}", "app: {image: testapp, memory: 2GiB}", 1)
	resp, body = adminDo(t, l.admin, "PUT", "/admin/config", testkit.AdminToken, []byte(edited))
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"changed":["templates.app.memory"]`) {
		t.Fatalf("edit: got %d %s, want templates.app.memory changed", resp.StatusCode, body)
	}
	want := strings.Replace(content, "app: {image: testapp}", "app: {image: testapp, memory: 2GiB}", 1)
	if file, _ := os.ReadFile(l.path); string(file) != want {
		t.Errorf("edit: file is\n%s\nwant only the edited line changed:\n%s", file, want)
	}
}
