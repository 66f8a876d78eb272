package app

import (
	"testing"

	"github.com/previewgate/previewgate/config"
)

// TestImagesToCheckLeavesOutDemo: serve builds the demo image itself, so
// config validate never checks the engine for it (the engine may have it
// from another test, so the list checked is what must leave it out).
func TestImagesToCheckLeavesOutDemo(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Templates = map[string]*config.Template{
		"app":  {Name: "app", Image: "previewgate-test-missing:nope"},
		"demo": {Name: "demo", Image: config.DemoImage},
	}
	got := imagesToCheck(cfg)
	for _, tpl := range got {
		if tpl.Image == config.DemoImage {
			t.Errorf("template %s (the demo image) is checked against the engine", tpl.Name)
		}
	}
	if len(got) != 1 {
		t.Errorf("%d templates to check, want 1 (app)", len(got))
	}
}
