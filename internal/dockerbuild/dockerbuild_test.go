package dockerbuild

import (
	"strings"
	"testing"
)

func TestReadStream(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"ok", `{"stream":"Step 1/2"}` + "\n" + `{"aux":{"ID":"sha256:x"}}`, ""},
		{"step failed", `{"stream":"Step 1/2"}{"errorDetail":{"message":"COPY failed"},"error":"COPY failed"}`, "COPY failed"},
		{"legacy error", `{"error":"bad"}`, "bad"},
		{"garbage", `{"stream":`, "read build output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadStream(strings.NewReader(tc.in))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}
