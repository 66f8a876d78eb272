package dockertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// Containers lists the containers of this test process (any state) that
// carry every one of labels, each given as key=value.
func Containers(t testing.TB, cli *client.Client, labels ...string) []container.Summary {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", LabelRun+"="+RunID()))
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return list
}

// OnlyContainer is the one container Containers lists; there being none
// or several fails the test.
func OnlyContainer(t testing.TB, cli *client.Client, labels ...string) container.Summary {
	t.Helper()
	list := Containers(t, cli, labels...)
	if len(list) != 1 {
		t.Fatalf("got %d containers labelled %v, want 1", len(list), labels)
	}
	return list[0]
}

// UniqueID returns a sandbox id starting with prefix that no other test
// uses, in this process or another one on the same engine.
func UniqueID(prefix string) string {
	return fmt.Sprintf("%s-%s-%d", prefix, RunID(), time.Now().UnixNano()%1e6)
}
