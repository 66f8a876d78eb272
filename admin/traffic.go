package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/previewgate/previewgate/adminapi"
	"github.com/previewgate/previewgate/sandboxmgr"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
	"github.com/previewgate/previewgate/traffic"
)

// Per-sandbox traffic, metadata filters, pause and resume (#23).

// Traffic is this replica's per-sandbox request log (*traffic.Recorder).
type Traffic interface {
	Counters(id string) (traffic.Counters, bool)
	Last(id string, n int) []traffic.Request
	Replica() string
	Forget(id string) // the sandbox was removed
}

// removeSandbox removes id and forgets this replica's log of it (other
// replicas forget theirs as their bound pushes it out).
func (a *admin) removeSandbox(ctx context.Context, id string) error {
	err := a.o.Sandboxes.Remove(ctx, id)
	if err == nil && a.o.Traffic != nil {
		a.o.Traffic.Forget(id)
	}
	return err
}

// trafficOf returns id's counters as this replica recorded them; nil if it
// recorded none (or keeps no log).
func (a *admin) trafficOf(id string) *adminapi.Traffic {
	if a.o.Traffic == nil {
		return nil
	}
	c, ok := a.o.Traffic.Counters(id)
	if !ok {
		return nil
	}
	return &adminapi.Traffic{Replica: a.o.Traffic.Replica(), Counters: adminapi.Counters(c)}
}

// maxFilters bounds the metadata.KEY=VALUE filters of one list.
const maxFilters = sandboxmgr.MaxMetadata

// metadataFilter reads ?metadata.KEY=VALUE (several: all must match). A
// key given twice, or a pair no sandbox could carry, is a 400.
func metadataFilter(r *http.Request) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("the query does not parse: %w", err)
	}
	var want map[string]string
	for k, vs := range q {
		key, ok := strings.CutPrefix(k, "metadata.")
		if !ok {
			// A misspelt filter (?metdata.user=u42, ?user=u42) must not
			// answer every sandbox, other users' included, as if it
			// matched.
			return nil, fmt.Errorf("unknown query parameter %q (filters are metadata.KEY=VALUE)", k)
		}
		if len(vs) != 1 {
			return nil, errors.New("metadata." + key + " given more than once")
		}
		if want == nil {
			want = make(map[string]string)
		}
		want[key] = vs[0]
	}
	if len(want) > maxFilters {
		return nil, errors.New("too many metadata filters")
	}
	if err := sandboxmgr.CheckMetadata(want); err != nil {
		return nil, err
	}
	return want, nil
}

// maxRequests bounds ?n= of GET .../requests: a ring holds no more.
const maxRequests = traffic.DefaultRing

// sandboxRequests answers id's last requests through this replica,
// newest first (?n=, default and most: all kept); 404 if the runtime has
// no sandbox id (one without traffic here answers none).
func (a *admin) sandboxRequests(w http.ResponseWriter, r *http.Request, id string) {
	n := 0
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			writeJSON(w, http.StatusBadRequest, errBody("n must be a positive number of requests", "bad_request"))
			return
		}
		n = min(v, maxRequests)
	}
	// An id that never existed is a 404 as on every call on one sandbox,
	// not an empty log that reads as "no traffic yet".
	if _, err := a.o.Sandboxes.Get(r.Context(), id); err != nil {
		writeSandboxError(w, err)
		return
	}
	body := adminapi.RequestLog{ID: id, Requests: []adminapi.Request{}}
	if a.o.Traffic != nil {
		body.Replica = a.o.Traffic.Replica()
		body.Requests = requestsOf(a.o.Traffic.Last(id, n))
		if c, ok := a.o.Traffic.Counters(id); ok {
			cs := adminapi.Counters(c)
			body.Counters = &cs
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// pauseSandbox pauses id where the runtime can. Kubernetes cannot: 409
// with code "pause_unsupported" and a message that says to stop instead;
// nothing is changed (mapping it to a stop silently would lose the memory
// the caller asked to keep).
func (a *admin) pauseSandbox(w http.ResponseWriter, r *http.Request, id string) {
	err := a.o.Sandboxes.Pause(r.Context(), id)
	switch {
	case errors.Is(err, sandboxmgr.ErrNoPause):
		writeJSON(w, http.StatusConflict, errBody(err.Error(), "pause_unsupported"))
	case errors.Is(err, sandboxmgr.ErrNotRunning):
		writeJSON(w, http.StatusConflict, errBody(err.Error()+"; only a running sandbox pauses (a stopped one holds no memory to keep; resume starts it)", "not_running"))
	case err != nil:
		writeSandboxError(w, err)
	default:
		a.o.Log.InfoContext(r.Context(), "sandbox paused through admin API", "sandbox", id)
		writeJSON(w, http.StatusOK, adminapi.Paused{ID: id, Paused: true})
	}
}

// resumeSandbox unpauses (or starts) id and waits until it is ready, as
// long as a PUT of its template does (wakeWait); it never creates one
// (404).
func (a *admin) resumeSandbox(w http.ResponseWriter, r *http.Request, id string) {
	ep, err := a.resume(r.Context(), id)
	if errors.Is(err, runtime.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, errBody("no such sandbox; resume never creates one: PUT /admin/sandboxes/"+id+" does", "not_found"))
		return
	}
	if err != nil {
		writeSandboxError(w, err)
		return
	}
	a.o.Log.InfoContext(r.Context(), "sandbox resumed through admin API", "sandbox", id)
	writeJSON(w, http.StatusOK, adminapi.Resumed{ID: id, Template: ep.Template, State: "running"})
}

// resume wakes id, bounded by its template's ready timeout (wakeWait):
// the template the sandbox was made from, as Get reads it from the
// runtime, in the live config.
func (a *admin) resume(ctx context.Context, id string) (sandboxmgr.Endpoint, error) {
	s, err := a.o.Sandboxes.Get(ctx, id)
	if err != nil {
		return sandboxmgr.Endpoint{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, wakeWait(a.o.Config().Templates[s.Template]))
	defer cancel()
	return a.o.Sandboxes.Resume(ctx, id)
}
