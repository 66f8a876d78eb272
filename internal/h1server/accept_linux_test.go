package h1server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

// emfileChild marks the subprocess TestAcceptSurvivesEMFILE runs in: it
// lowers its own descriptor limit, which would hurt parallel tests here.
const emfileChild = "PREVIEWGATE_TEST_EMFILE_CHILD"

// acceptLog passes on the Server's accept-loop messages.
type acceptLog struct {
	slog.Handler
	msgs chan string
}

func (h acceptLog) Enabled(context.Context, slog.Level) bool { return true }
func (h acceptLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "accept") {
		select {
		case h.msgs <- r.Message:
		default:
		}
	}
	return nil
}

// TestAcceptSurvivesEMFILE: when the process is out of descriptors, the
// accept loop backs off (one log line), an admin connection already open
// keeps answering, and once descriptors free up the connection that
// waited in the backlog is served, as are new ones on both listeners
// (#13, item 6).
func TestAcceptSurvivesEMFILE(t *testing.T) {
	if os.Getenv(emfileChild) == "" {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAcceptSurvivesEMFILE$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), emfileChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestAcceptSurvivesEMFILE") {
			t.Fatalf("subprocess: %v\n%s", err, out)
		}
		return
	}

	msgs := make(chan string, 16)
	preview := NewServer(testConfig(), leanAll{responses()}, slog.New(acceptLog{msgs: msgs}))
	preview.Conns = nil // no cap: this test is about running out anyway
	addr := serve(t, preview).Listener.Addr().String()
	admin := NewServer(testConfig(), responses(), testkit.Logger(t))
	admin.Conns = nil
	adminAddr := serve(t, admin).Listener.Addr().String()
	adminConn := dialFrom(t, "127.0.0.1", adminAddr)
	if !get(adminConn) {
		t.Fatal("admin not served before the test")
	}

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(fds) + 32)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	release := func() {
		for _, f := range files {
			f.Close()
		}
		files = nil
	}
	t.Cleanup(func() {
		release()
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	})
	// Take every descriptor, then give one back for the client's socket:
	// the server has none left to accept it with.
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		files = append(files, f)
	}
	files[len(files)-1].Close()
	files = files[:len(files)-1]
	waiting, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial with one descriptor free: %v", err)
	}
	defer waiting.Close()
	io.WriteString(waiting, "GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case m := <-msgs:
		if !strings.Contains(m, "accept failed") {
			t.Fatalf("got log %q, want the accept failure", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("accept never failed")
	}
	if !get(adminConn) {
		t.Fatal("the admin connection did not answer while out of descriptors")
	}

	release()
	waiting.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(waiting), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the waiting request got %v (%v), want 200", resp, err)
	}
	select {
	case m := <-msgs:
		if !strings.Contains(m, "accepting again") {
			t.Fatalf("got log %q, want accepting again (one line per burst)", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no log of accepting again")
	}
	if !get(dialFrom(t, "127.0.0.1", addr)) {
		t.Fatal("a new preview connection was not served")
	}
	if !get(dialFrom(t, "127.0.0.1", adminAddr)) {
		t.Fatal("a new admin connection was not served")
	}
}
