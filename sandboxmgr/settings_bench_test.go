package sandboxmgr

import (
	"fmt"
	"testing"
)

// BenchmarkSettingsRead is what the request path pays per request for a
// sandbox's own settings (policy: public), with 1,000 sandboxes cached,
// on all cores at once: no lock.
func BenchmarkSettingsRead(b *testing.B) {
	m := &Manager{}
	yes := true
	for i := range 1000 {
		m.cacheRecord(fmt.Sprintf("sbx%d", i), cachedRecord{s: Settings{Public: &yes}}, false)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if m.Settings("sbx500").Public == nil {
				b.Fatal("lost")
			}
		}
	})
}
