package docker

import (
	"context"
	"log/slog"

	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// A Docker engine is served by one gateway per scope (DESIGN.md
// "Scale-out is Kubernetes"): the gateway keeps its records in its data
// dir, and a second gateway on that data dir waits as a standby.

// OwnOptions say what a gateway takes for its own.
type OwnOptions struct {
	DataDir string // where its records are kept
}

// Ownership is what a gateway serves alone: its records.
type Ownership struct {
	// Records keep per-sandbox settings, share links and removal marks
	// (sandboxmgr.Config.Records).
	Records runtime.Records
	store   *boltstore.Store
}

// Own takes what a Docker gateway serves alone before it serves: its data
// dir's records, waiting as a standby while another gateway holds them
// (it says so in log), until that one exits or ctx ends (ctx's error).
func Own(ctx context.Context, o OwnOptions, log *slog.Logger) (*Ownership, error) {
	store, err := boltstore.Open(ctx, o.DataDir, log)
	if err != nil {
		return nil, err
	}
	return &Ownership{Records: store, store: store}, nil
}

// Close gives it all up: a standby takes over.
func (w *Ownership) Close() {
	w.store.Close()
}
