package records

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/previewgate/previewgate/links"
)

// TestRecordWithoutMark: a record written before removal marks existed
// decodes as before (its settings, no mark), and one with a mark keeps
// its settings readable.
func TestRecordWithoutMark(t *testing.T) {
	r := New(nil, Options{})
	old := `{"public":true,"links":[{"id":"l1","digest":"d","path":"/","created":"2026-01-01T00:00:00Z","expires":"2026-01-02T00:00:00Z"}]}`
	c := r.decode("a", Record{Data: []byte(old), Version: "3"}, time.Now())
	if c.s.Public == nil || !*c.s.Public || len(c.s.Links) != 1 || c.s.Links[0].Digest != "d" || c.removed != nil || c.version != "3" {
		t.Errorf("an old record: got %+v, want public, one link, no mark", c)
	}
	marked := `{"public":true,"removed":{"id":"x1","at":"2026-01-01T00:00:00Z"}}`
	c = r.decode("a", Record{Data: []byte(marked)}, time.Now())
	if c.s.Public == nil || c.removed == nil || c.removed.ID != "x1" {
		t.Errorf("a marked record: got %+v, want public and mark x1", c)
	}
}

// TestRecordVersioned: what is written says its format ("v": 1) and
// reads back as it was; an older gateway, which ignores "v", reads the
// same keys it always wrote.
func TestRecordVersioned(t *testing.T) {
	yes := true
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := Settings{Public: &yes, KeepUpUntil: at, Links: []links.Link{{ID: "l1", Digest: "d", Port: 3001, Path: "/docs", Created: at, Expires: at.Add(time.Hour), Revoked: at}}}
	b, err := encode(s, &mark{ID: "m1", At: at})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["v"] != float64(1) {
		t.Errorf("stored version: got %v in %s, want 1", raw["v"], b)
	}
	for _, key := range []string{`"public":true`, `"keep_up_until":`, `"links":[{"id":"l1","digest":"d","port":3001,"path":"/docs",`, `"revoked":`, `"removed":{"id":"m1",`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("stored record %s lacks %s", b, key)
		}
	}
	got, m, err := decode(b)
	if err != nil || fmt.Sprint(got.Links) != fmt.Sprint(s.Links) || !got.KeepUpUntil.Equal(at) || got.Public == nil || m == nil || m.ID != "m1" {
		t.Errorf("read back: %+v %+v %v, want %+v and mark m1", got, m, err, s)
	}
}

// BenchmarkSettingsRead is what the request path pays per request for a
// sandbox's own settings (policy: public), with 1,000 sandboxes cached,
// on all cores at once: no lock.
func BenchmarkSettingsRead(b *testing.B) {
	r := New(memStore{}, Options{})
	yes := true
	for i := range 1000 {
		r.cache(fmt.Sprintf("sbx%d", i), cached{s: Settings{Public: &yes}}, false)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s, _ := r.Settings("sbx500"); s.Public == nil {
				b.Fatal("lost")
			}
		}
	})
}
