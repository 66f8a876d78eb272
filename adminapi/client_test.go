package adminapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/previewgate/previewgate/adminapi"
)

// serve answers every call with h, on a loopback server, for the Client.
func serve(t *testing.T, h http.HandlerFunc) *adminapi.Client {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &adminapi.Client{BaseURL: srv.URL, Token: "tok"}
}

// TestClientErrors: an answer other than 2xx is an *adminapi.Error that
// errors.As finds, with the status, the API's code and message and the
// object as sent; a failed start carries its reason, exit code and
// output; an answer that is no error object (a proxy's page) says its
// status; a 2xx that is not the call's is ErrBadAnswer.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		check      func(*testing.T, error)
	}{
		{"api error", `{"code":"not_found","error":"no such sandbox"}` + "\n", 404, func(t *testing.T, err error) {
			var e *adminapi.Error
			if !errors.As(err, &e) || e.Status != 404 || e.Code != "not_found" || e.Message != "no such sandbox" ||
				e.StartFailure != nil || string(e.Body) != `{"code":"not_found","error":"no such sandbox"}`+"\n" {
				t.Errorf("got %#v, want the 404 not_found as sent", err)
			}
			if got := err.Error(); got != "no such sandbox (not_found)" {
				t.Errorf("got message %q", got)
			}
		}},
		{"failed start", `{"code":"sandbox_exited","error":"it exited","exit_code":3,"logs":["boom"],"reason":"exited"}`, 502, func(t *testing.T, err error) {
			var e *adminapi.Error
			if !errors.As(err, &e) || e.StartFailure == nil || e.Reason != "exited" || e.ExitCode == nil || *e.ExitCode != 3 || !slices.Equal(e.Logs, []string{"boom"}) {
				t.Fatalf("got %#v, want the start failure", err)
			}
			if got := err.Error(); got != "it exited (sandbox_exited)\nits last output:\n  boom" {
				t.Errorf("got message %q", got)
			}
		}},
		{"a proxy's page", "<h1>502 Bad Gateway</h1>", 502, func(t *testing.T, err error) {
			var e *adminapi.Error
			if !errors.As(err, &e) || e.Status != 502 || e.Code != "" || e.Body != nil || !strings.HasSuffix(e.Message, " answered 502 Bad Gateway") {
				t.Errorf("got %#v, want the status said", err)
			}
		}},
		{"not the call's answer", `<html>`, 200, func(t *testing.T, err error) {
			if !errors.Is(err, adminapi.ErrBadAnswer) {
				t.Errorf("got %v, want ErrBadAnswer", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := c.GetSandbox(context.Background(), "abc")
			tc.check(t, err)
		})
	}
}

// TestClientSends: each call is its method and path, with the token, the
// metadata filters as the query and the body as JSON (absent PATCH fields
// left out, null where asked for).
func TestClientSends(t *testing.T) {
	t.Parallel()
	type sent struct{ method, uri, auth, body string }
	var got []sent
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, sent{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), string(b)})
		if r.URL.Path == "/admin/sandboxes" {
			io.WriteString(w, "[]")
			return
		}
		io.WriteString(w, "{}")
	})
	ctx := context.Background()
	c.ListSandboxes(ctx, map[string]string{"user": "u42", "team": "x"})
	c.PutSandbox(ctx, "abc", adminapi.PutRequest{Metadata: map[string]string{"user": "u42"}})
	keep := "2h"
	c.PatchSettings(ctx, "abc", adminapi.SettingsPatch{Public: adminapi.Null[bool](), KeepUp: &keep})
	c.PatchSettings(ctx, "abc", adminapi.SettingsPatch{Public: adminapi.Value(false), KeepUpUntil: adminapi.Value("2030-01-02T15:04:05Z")})
	c.CreateLink(ctx, "abc", adminapi.LinkRequest{TTL: "10m"})
	c.RevokeLink(ctx, "abc", "l/1")
	c.Requests(ctx, "abc", 5)
	c.Logs(ctx, "abc", 0)
	c.StopSandbox(ctx, "abc")
	want := []sent{
		{"GET", "/admin/sandboxes?metadata.team=x&metadata.user=u42", "Bearer tok", ""},
		{"PUT", "/admin/sandboxes/abc", "Bearer tok", `{"metadata":{"user":"u42"}}`},
		{"PATCH", "/admin/sandboxes/abc", "Bearer tok", `{"public":null,"keep_up":"2h"}`},
		{"PATCH", "/admin/sandboxes/abc", "Bearer tok", `{"public":false,"keep_up_until":"2030-01-02T15:04:05Z"}`},
		{"POST", "/admin/sandboxes/abc/links", "Bearer tok", `{"ttl":"10m"}`},
		{"DELETE", "/admin/sandboxes/abc/links/l%2F1", "Bearer tok", ""},
		{"GET", "/admin/sandboxes/abc/requests?n=5", "Bearer tok", ""},
		{"GET", "/admin/sandboxes/abc/logs?tail=0", "Bearer tok", ""},
		{"POST", "/admin/sandboxes/abc/stop", "Bearer tok", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestNullable: a PATCH field is absent, null or a value on the wire, and
// a value of the wrong type is kept as Err for the server to name.
func TestNullable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in                 string
		absent, null, isOK bool
		bad                bool
	}{
		{`{}`, true, false, false, false},
		{`{"public":null}`, false, true, false, false},
		{`{"public":true}`, false, false, true, false},
		{`{"public":"yes"}`, false, false, false, true},
	} {
		var p adminapi.SettingsPatch
		if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		v, ok := p.Public.Get()
		if p.Public.IsZero() != tc.absent || p.Public.IsNull() != tc.null || ok != tc.isOK || (p.Public.Err() != nil) != tc.bad || (ok && !v) {
			t.Errorf("%s: got absent %t null %t value %t,%t err %v", tc.in, p.Public.IsZero(), p.Public.IsNull(), v, ok, p.Public.Err())
		}
	}
}

// TestFollowLogs: the lines of a followed log, in order, until the end
// event (nil); the gateway's error event is ErrFollowFailed with its
// message; a stream that ends without the end event is ErrStreamBroken;
// an event that is no JSON string is ErrBadAnswer.
func TestFollowLogs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, stream string
		lines        []string
		err          error
		msg          string
	}{
		{"end", "data: \"a\"\n\n: comment\n\ndata: \"b c\"\n\nevent: end\ndata: {}\n\n", []string{"a", "b c"}, nil, ""},
		{"error", "data: \"a\"\n\nevent: error\ndata: \"engine gone\"\n\n", []string{"a"}, adminapi.ErrFollowFailed, "following stopped: engine gone"},
		{"cut", "data: \"a\"\n\n", []string{"a"}, adminapi.ErrStreamBroken, "the gateway ended the stream before the container stopped"},
		{"bad event", "data: {\"x\":1}\n\n", nil, adminapi.ErrBadAnswer, `unexpected event "{\"x\":1}"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.RequestURI() != "/admin/sandboxes/abc/logs?tail=5&follow=1" {
					t.Errorf("asked %s", r.URL.RequestURI())
				}
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.stream)
			})
			var lines []string
			err := c.FollowLogs(context.Background(), "abc", 5, func(l string) error { lines = append(lines, l); return nil })
			if !slices.Equal(lines, tc.lines) {
				t.Errorf("got lines %q, want %q", lines, tc.lines)
			}
			if tc.err == nil && err != nil || tc.err != nil && (!errors.Is(err, tc.err) || err.Error() != tc.msg) {
				t.Errorf("got %v, want %v saying %q", err, tc.err, tc.msg)
			}
		})
	}
}
