// Command etcd runs a single-member etcd server for the Kubernetes tests of
// previewgate. etcd's own server module cannot be "go install"ed (its go.mod
// has replace directives), so this program embeds it instead (#15).
//
// Usage: etcd -data-dir DIR -listen-client URL -listen-peer URL
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("listen-client", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("listen-peer", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("etcd: -data-dir is required")
	}
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatalf("etcd: -listen-client: %v", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatalf("etcd: -listen-peer: %v", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.Name = "previewgate-test"
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	// Tests throw the data away; fsync would only slow them down.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd: ready on %s", cu)
	case <-time.After(60 * time.Second):
		log.Fatal("etcd: not ready after 60s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		log.Printf("etcd: %v, stopping", s)
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
}
