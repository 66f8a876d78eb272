package pages

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/previewgate/previewgate/sandboxmgr"
)

// hostile is app output that tries to end an SSE event, fake a ready
// phase, inject markup and colour a terminal.
const hostile = "Error: Cannot find module './missing'\n\ndata: {\"phase\":\"ready\"}\n\n" +
	"<img id=pwn src=x onerror=alert(1)></pre><script>alert(2)</script>\x1b[31mred\x1b[0m"

func TestErrorHTMLOrJSON(t *testing.T) {
	t.Parallel()
	code := 1
	f := Failure{Status: 502, Code: "sandbox_exited", Msg: "The app exited <b>badly</b>.", RetryAfter: 7,
		Reason: sandboxmgr.ReasonExited, ExitCode: &code, Logs: Logs([]string{hostile})}
	for _, tc := range []struct {
		name, accept, wantType string
	}{
		{"browser", "text/html,application/xhtml+xml", "text/html; charset=utf-8"},
		{"api client", "application/json", "application/json"},
		{"no accept", "", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/", nil)
			if tc.accept != "" {
				r.Header.Set("Accept", tc.accept)
			}
			w := httptest.NewRecorder()
			Error(w, r, f)
			h := w.Result().Header
			if w.Code != 502 || h.Get("Content-Type") != tc.wantType || h.Get("Cache-Control") != "no-store" ||
				h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Retry-After") != "7" {
				t.Fatalf("got %d %v, want 502 %s, no-store, nosniff, Retry-After 7", w.Code, h, tc.wantType)
			}
			body := w.Body.String()
			if tc.wantType == "application/json" {
				var got struct {
					Error, Code, Reason string
					ExitCode            *int `json:"exit_code"`
					Logs                []string
				}
				if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
					t.Fatalf("%s: %v", body, err)
				}
				if got.Error != f.Msg || got.Code != f.Code || got.Reason != f.Reason || got.ExitCode == nil || *got.ExitCode != 1 ||
					len(got.Logs) == 0 || !strings.Contains(strings.Join(got.Logs, "\n"), "Cannot find module") {
					t.Errorf("got %s, want the failure's fields", body)
				}
				return
			}
			for _, bad := range []string{"<img", "<script>alert", "<b>", "\x1b"} {
				if strings.Contains(body, bad) {
					t.Errorf("got %q in the page, want it escaped or stripped", bad)
				}
			}
			for _, want := range []string{"<title>Preview failed to start</title>", "&lt;img id=pwn", "&lt;b&gt;badly", ">Retry</button>", "502 sandbox_exited"} {
				if !strings.Contains(body, want) {
					t.Errorf("got page %s, want %q in it", body, want)
				}
			}
		})
	}
}

// TestPagesSelfContained: no page loads anything from elsewhere, and the
// only script is the waiting page's own, which sets the stream's text with
// textContent and asks for StatusPath.
func TestPagesSelfContained(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	Waiting(w)
	waiting := w.Body.String()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Accept", "text/html")
	w = httptest.NewRecorder()
	Error(w, r, Failure{Status: 404, Code: "unknown_host", Msg: "Not here."})
	errPage := w.Body.String()
	external := regexp.MustCompile(`(?i)\b(src|href)\s*=|@import|url\(`)
	for name, page := range map[string]string{"waiting": waiting, "error": errPage} {
		if m := external.FindString(page); m != "" {
			t.Errorf("%s page: got %q, want no external reference", name, m)
		}
		if !strings.Contains(page, "--acc:") {
			t.Errorf("%s page: got no shared style", name)
		}
	}
	if strings.Contains(errPage, "<script") {
		t.Errorf("error page: got a script, want none")
	}
	if strings.Count(waiting, "<script") != 1 || strings.Contains(waiting, "innerHTML") ||
		!strings.Contains(waiting, `new EventSource("`+StatusPath+`")`) {
		t.Errorf("waiting page: want one script of its own, textContent only, following %s", StatusPath)
	}
	if h := w.Result().Header; h.Get("Retry-After") != "" {
		t.Errorf("got Retry-After %q, want none when RetryAfter is 0", h.Get("Retry-After"))
	}
}

// TestErrorReloads: an error page with Reload has one script, which
// reloads the page after RetryAfter seconds, ReloadTries times at most,
// and sets text with textContent only; it keeps nothing of the query (a
// share link: the app's pages, on the same origin, read the storage).
// JSON is unchanged.
func TestErrorReloads(t *testing.T) {
	t.Parallel()
	f := Failure{Status: 401, Code: "link_invalid", Msg: "Not known here yet.", RetryAfter: 1, Reload: true}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Accept", "text/html")
	w := httptest.NewRecorder()
	Error(w, r, f)
	page := w.Body.String()
	if strings.Count(page, "<script") != 1 || strings.Contains(page, "innerHTML") || strings.Contains(page, "location.search") ||
		!regexp.MustCompile(`location\.reload\(\); \},\s*1000\s*\)`).MatchString(page) ||
		!regexp.MustCompile(`t\.n >=\s*10\s*\)`).MatchString(page) {
		t.Errorf("reloading error page: want one script, textContent only, reloading after 1000 ms 10 times at most; got %s", page)
	}
	if w.Code != 401 || w.Result().Header.Get("Retry-After") != "1" {
		t.Errorf("got %d Retry-After %q, want 401 and 1", w.Code, w.Result().Header.Get("Retry-After"))
	}
	r.Header.Set("Accept", "application/json")
	w = httptest.NewRecorder()
	Error(w, r, f)
	if strings.Contains(w.Body.String(), "reload") {
		t.Errorf("JSON: got %s, want no reload", w.Body.String())
	}
}

func TestLogsBounded(t *testing.T) {
	t.Parallel()
	lines := make([]string, LogLines+10)
	for i := range lines {
		lines[i] = strings.Repeat("é", LogRunes*2)
	}
	lines[len(lines)-1] = hostile
	got := Logs(lines)
	if len(got) != LogLines {
		t.Fatalf("got %d lines, want the last %d", len(got), LogLines)
	}
	for _, l := range got {
		if utf8.RuneCountInString(l) > LogRunes || strings.ContainsAny(l, "\x1b\r\n") {
			t.Fatalf("got line %q, want at most %d runes without control bytes", l, LogRunes)
		}
	}
	if Logs(nil) != nil {
		t.Errorf("got lines for none, want nil")
	}
}

// TestStreamFraming runs Stream with hostile logs: every event is one
// data line of JSON, a phase in the logs is not taken for one, and the
// stream ends at ready.
func TestStreamFraming(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n atomic.Int32
		Stream(w, r, time.Minute, func() Event {
			switch n.Add(1) {
			case 1, 2: // the same twice: sent once
				return Event{Phase: sandboxmgr.PhaseStarting, Logs: Logs([]string{hostile}), ElapsedMS: int64(n.Load())}
			}
			return Event{Phase: sandboxmgr.PhaseReady}
		})
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("got Content-Type %q, want text/event-stream", ct)
	}
	var phases []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		var ev Event
		if !ok || json.Unmarshal([]byte(data), &ev) != nil {
			t.Fatalf("got line %q, want one JSON data line per event", line)
		}
		if strings.Contains(data, "<img") || strings.Contains(data, "\x1b") {
			t.Errorf("got %q, want markup escaped and escapes stripped", data)
		}
		phases = append(phases, ev.Phase)
	}
	if want := []string{sandboxmgr.PhaseStarting, sandboxmgr.PhaseReady}; strings.Join(phases, ",") != strings.Join(want, ",") {
		t.Fatalf("got phases %v, want %v", phases, want)
	}
}

// TestStreamLimit: a wake that never ends gets a failed event at the
// limit; a client that leaves ends the stream.
func TestStreamLimit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", StatusPath, nil)
		Stream(w, r, 5*time.Second, func() Event { return Event{Phase: sandboxmgr.PhaseStarting} })
		frames := strings.Split(strings.TrimSpace(w.Body.String()), "\n\n")
		var last Event
		if len(frames) != 2 || json.Unmarshal([]byte(strings.TrimPrefix(frames[1], "data: ")), &last) != nil ||
			last.Phase != sandboxmgr.PhaseFailed || last.Reason != sandboxmgr.ReasonReadyTimeout {
			t.Fatalf("got %q, want one starting event, then failed with ready_timeout", frames)
		}

		ctx, cancel := context.WithCancel(context.Background())
		r = httptest.NewRequestWithContext(ctx, "GET", StatusPath, nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			Stream(httptest.NewRecorder(), r, time.Hour, func() Event { return Event{Phase: sandboxmgr.PhaseStarting} })
		}()
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the stream went on after the client left")
		}
	})
}
