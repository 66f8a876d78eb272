package sandboxmgr

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/testing/testkit"
)

func TestWaitReady(t *testing.T) {
	// failFirst answers 500 to the first n GETs, then 204.
	failFirst := func(n int32) http.Handler {
		var calls atomic.Int32
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= n {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})
	}
	for _, tc := range []struct {
		name    string
		handler http.Handler // nil: nothing listens
		path    string
		alive   func(context.Context) error
		want    error
	}{
		{name: "tcp only", handler: failFirst(1 << 30)},
		{name: "path answers 404", handler: http.NotFoundHandler(), path: "/"},
		{name: "path 500 then ok", handler: failFirst(3), path: "/health"},
		{name: "path always 500", handler: failFirst(1 << 30), path: "/", want: ErrNotReady},
		{name: "nothing listens", want: ErrNotReady},
		{name: "container died", alive: func(context.Context) error { return errBoom }, want: errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := testkit.DeadAddr(t)
			if tc.handler != nil {
				srv := httptest.NewServer(tc.handler)
				t.Cleanup(srv.Close)
				addr = strings.TrimPrefix(srv.URL, "http://")
			}
			timeout := 5 * time.Second
			if tc.want != nil && tc.alive == nil {
				timeout = 200 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			err := waitReady(ctx, addr, tc.path, tc.alive)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

var errBoom = errors.New("boom")
