package e2e

import (
	"testing"

	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

// TestMain removes what the tests left in Docker. (The e2e package of the
// root split has its own main_test.go: keep that one, it does this too.)
func TestMain(m *testing.M) { dockertest.Main(m) }
