package testkit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Request sends a request for host to srv (a gateway), with token as a
// bearer token unless it is empty and hdr as header name, value pairs. It
// does not follow redirects. The body is closed when the test ends.
func Request(t testing.TB, srv *httptest.Server, method, host, path, token string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, host, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
