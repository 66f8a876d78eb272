package dockerbuild_test

import (
	"context"
	"testing"
	"time"

	"github.com/previewgate/previewgate/internal/dockerbuild"
	"github.com/previewgate/previewgate/internal/testing/dockertest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// TestGoProgramSharesNoImage: the same program built twice (as by two
// test processes at once, with their own labels) shares no image but the
// empty base: a build cache hit would make the second image a child of
// the first build's step images, and the first process's cleanup (its
// image removed with its parents) would pull them from under a build
// still reading them ("failed to get digest").
func TestGoProgramSharesNoImage(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	parents := map[string]string{}
	for _, tag := range []string{"previewgate-shared-a:" + dockertest.RunID(), "previewgate-shared-b:" + dockertest.RunID()} {
		labels := dockertest.Labels()
		labels["previewgate.test.tag"] = tag // the two images differ, as two runs' do
		if err := dockerbuild.GoProgram(ctx, cli, "./testdata/testapp", tag, 3000, labels); err != nil {
			t.Fatal(err)
		}
		for id := tag; id != ""; {
			ins, err := cli.ImageInspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if id != tag {
				if other, ok := parents[ins.ID]; ok {
					t.Fatalf("%s and %s share the step image %s", other, tag, ins.ID)
				}
				parents[ins.ID] = tag
			}
			id = ins.Parent
		}
	}
}
