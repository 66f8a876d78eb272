package admin

import (
	"fmt"
	"net/http"
	"strings"
)

// jsonMisses answers a call the API does not have as the API answers its
// errors (docs/api.md: JSON {"error", "code"}), not with net/http's text:
// 405 method_not_allowed with Allow, or 404 no_such_call. A backend whose
// client reads every answer as JSON, as the docs' examples do, then
// learns what it got wrong (a POST /admin/sandboxes/{id}) instead of
// failing to parse "Method Not Allowed". Only under /admin/.
func jsonMisses(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" || !strings.HasPrefix(r.URL.Path, "/admin/") {
			mux.ServeHTTP(w, r)
			return
		}
		var allow []string
		for _, m := range []string{"GET", "PUT", "POST", "PATCH", "DELETE"} {
			other := r.WithContext(r.Context())
			other.Method = m
			if _, pattern := mux.Handler(other); pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeJSON(w, http.StatusNotFound, errBody("no such call: "+r.Method+" "+r.URL.Path+" (docs/api.md lists the calls)", "no_such_call"))
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, errBody(fmt.Sprintf("%s is not a call on %s; it takes %s (docs/api.md)",
			r.Method, r.URL.Path, strings.Join(allow, ", ")), "method_not_allowed"))
	})
}
