package dockertest

import (
	"context"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestTestAppImage(t *testing.T) {
	c := Client(t)
	tag := TestAppImage(t)
	img, err := c.ImageInspect(context.Background(), tag)
	if err != nil {
		t.Fatalf("inspect %s: %v", tag, err)
	}
	if got := img.Config.Labels[LabelRun]; got != RunID() {
		t.Errorf("got label %s=%q, want %q", LabelRun, got, RunID())
	}
	if again := TestAppImage(t); again != tag {
		t.Errorf("got tag %q on second call, want %q (built once)", again, tag)
	}
}
