package auth

import (
	"context"
	"testing"

	"github.com/previewgate/previewgate/config"
)

// benchVerify measures one key: "uncached" is the full signature and claims
// check (what a new token costs), "cached" is Check on a request carrying a
// token already seen (the hot path: header parse, cache hit, sandbox check).
func benchVerify(b *testing.B, key config.Key) {
	v, _ := newVerifier(b, testAuth(key), false)
	tok := mint(b, key, MintOptions{Sandbox: "a", Template: "nextjs"})
	ctx := context.Background()
	b.Run("uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.parse(ctx, tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		r := bearerReq(tok)
		if _, err := v.Check(r, "a"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Check(r, "a"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := bearerReq(tok)
			for pb.Next() {
				if _, err := v.Check(r, "a"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func BenchmarkVerifyHS256(b *testing.B) { benchVerify(b, hsKey) }
func BenchmarkVerifyEdDSA(b *testing.B) { benchVerify(b, edKey) }
func BenchmarkVerifyES256(b *testing.B) { benchVerify(b, esKey) }
func BenchmarkVerifyRS256(b *testing.B) { benchVerify(b, rsKey) }
