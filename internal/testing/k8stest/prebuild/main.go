// Command prebuild builds (or finds cached) the kube-apiserver and etcd
// binaries the Kubernetes tests run, and prints where they are. .ci/run
// calls it before the tests so that no test binary spends its timeout on a
// cold build (#15).
//
// It only builds into (or finds in) the cache k8stest.Build keeps: it must
// never start a control plane, never touch Docker, and never be part of the
// previewgate binary or imported by anything.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/previewgate/previewgate/internal/testing/k8stest"
)

func main() {
	t0 := time.Now()
	b, err := k8stest.Build(context.Background(), log.Printf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("kube-apiserver: %s\netcd: %s\n(%s)\n", b.APIServer, b.Etcd, time.Since(t0).Round(time.Second))
}
