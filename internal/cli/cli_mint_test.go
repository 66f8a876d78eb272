package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenMintNamesTheKid: --kid of a key the config lacks says so and
// lists the kids, and a key that only verifies says it cannot sign; both
// once answered "no key in the config can sign" while another key could.
func TestTokenMintNamesTheKid(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`domain: preview.localhost
auth:
  keys:
    - {kid: k1, alg: HS256, secret: "0123456789abcdef0123456789abcdef"}
    - {kid: k2, alg: ES256, public_key_file: %q}
templates:
  app: {image: app:1}
`, filepath.Join(keysDir, "ec.pub"))), 0o600)
	for _, tc := range []struct{ kid, want string }{
		{"k9", `token mint: no key "k9" in the config (kids: k1, k2)`},
		{"k2", "token mint: key k2 cannot sign (it needs a secret or private_key_file)"},
	} {
		var out, errb bytes.Buffer
		if code := run([]string{"token", "mint", "--config", path, "--sandbox", "abc", "--kid", tc.kid}, &out, &errb); code != 1 || out.Len() > 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("--kid %s: exit %d, stdout %q, stderr %q; want 1 and %q", tc.kid, code, out.String(), errb.String(), tc.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"token", "mint", "--config", path, "--sandbox", "abc", "--kid", "k1"}, &out, &errb); code != 0 || out.Len() == 0 {
		t.Errorf("--kid k1: exit %d, stderr %q; want a token", code, errb.String())
	}
}
