package docker

import (
	"context"
	"log/slog"
	"time"

	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/records"
)

// A Docker engine is served by one gateway per scope (DESIGN.md
// "Scale-out is Kubernetes"): the gateway keeps its records in its data
// dir, a second gateway on that data dir waits as a standby, and a second
// live one of the same scope elsewhere is refused (lock.go).

// OwnOptions say what a gateway takes for its own.
type OwnOptions struct {
	Host    string            // the engine; zero: DOCKER_HOST or the default socket
	DataDir string            // where its records are kept
	Labels  map[string]string // its scope (sandboxmgr.Config.Labels)
	// Lost is called, once, if the scope turns out served by another live
	// gateway after Own returned (the engine could not be asked at start,
	// or another gateway took the scope over): the gateway must exit.
	Lost func(error)
}

// Ownership is what a gateway serves alone: its records and its scope.
type Ownership struct {
	// Records keep per-sandbox settings, share links and removal marks
	// (records.New over it).
	Records records.Store
	store   *boltstore.Store
	lock    *scopeLock
}

// Own takes what a Docker gateway serves alone before it serves: its data
// dir's records, waiting as a standby while another gateway holds them
// (it says so in log), until that one exits or ctx ends (ctx's error);
// then its scope on the engine, refused with ErrScopeTaken (saying why and
// what to do) while a live gateway of another data dir serves it.
func Own(ctx context.Context, o OwnOptions, log *slog.Logger) (*Ownership, error) {
	store, err := boltstore.Open(ctx, o.DataDir, log)
	if err != nil {
		return nil, err
	}
	cli, err := newDockerClient(o.Host, 5*time.Second)
	if err != nil {
		store.Close()
		return nil, err
	}
	lock, err := lockScope(ctx, cli, o.Labels, store.Owner(), o.Lost, log)
	if err == nil {
		if err = importVolumeRecords(ctx, cli, store, o.Labels, log); err != nil {
			lock.close()
		}
	}
	if err != nil {
		cli.Close()
		store.Close()
		return nil, err
	}
	return &Ownership{Records: store, store: store, lock: lock}, nil
}

// Close gives it all up: the scope lock goes (another gateway of the scope
// may start), and the data dir's records (a standby takes over).
func (w *Ownership) Close() {
	w.lock.close()
	w.lock.cli.Close()
	w.store.Close()
}
