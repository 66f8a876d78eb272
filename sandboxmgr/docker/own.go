package docker

import (
	"context"
	"log/slog"
	"time"

	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/records"
)

// A Docker engine is served by one gateway per scope (DESIGN.md
// "Scale-out is Kubernetes"): records in its data dir, a second gateway
// there waits as a standby, one of the scope elsewhere is refused.

// OwnOptions say what a gateway takes for its own.
type OwnOptions struct {
	Host    string            // the engine; zero: DOCKER_HOST or the default socket
	DataDir string            // where its records are kept
	Labels  map[string]string // its scope (sandboxmgr.Config.Labels)
	// Lost is called once if the scope turns out served by another live
	// gateway after Own returned: the gateway must exit.
	Lost func(error)
}

// Ownership is what a gateway serves alone: its records and its scope.
type Ownership struct {
	// Records keep per-sandbox settings, links and removal marks.
	Records records.Store
	store   *boltstore.Store
	lock    *scopeLock
}

// Own takes what a Docker gateway serves alone: its data dir's records,
// waiting as a standby (logged) while another gateway holds them, until
// that one exits or ctx ends; then its scope on the engine, refused with
// ErrScopeTaken while a live gateway of another data dir serves it.
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
		if ierr := importVolumeRecords(ctx, cli, store, o.Labels, log); ierr != nil {
			// As the lock: an engine not answering yet does not stop a
			// gateway from serving; the import runs at its next start.
			log.WarnContext(ctx, "record volumes of an earlier version not imported: the next start tries again", "err", ierr)
		}
	}
	if err != nil {
		cli.Close()
		store.Close()
		return nil, err
	}
	return &Ownership{Records: store, store: store, lock: lock}, nil
}

// Close gives up the scope lock and the data dir's records.
func (w *Ownership) Close() {
	w.lock.close()
	w.lock.cli.Close()
	w.store.Close()
}
