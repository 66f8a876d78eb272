package docker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/internal/boltstore"
	"github.com/previewgate/previewgate/records"
	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// Versions before the bbolt store kept each sandbox's record (settings,
// share links, removal mark) as labelled volumes on the engine,
// previewgate-rec-<id>-<n>: the record's bytes, in today's format, in one
// label and its version n in another; the newest version counted.
const (
	legacyVersion = "previewgate.record.version"
	legacyData    = "previewgate.record.data"
)

// importVolumeRecords copies the newest record volume of each of the
// scope's sandboxes into store, once per data dir (an upgrade loses no
// setting or link), and leaves the volumes: the log says how to remove
// them. A record the store has already is kept.
func importVolumeRecords(ctx context.Context, cli *client.Client, store *boltstore.Store, labels map[string]string, log *slog.Logger) error {
	return store.Once("volume-records", func() error {
		scoped := runtime.Scoped(labels)
		f := filters.NewArgs(filters.Arg("label", records.LabelRecord))
		for k, v := range scoped {
			f.Add("label", k+"="+v)
		}
		resp, err := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
		if err != nil {
			return classify("list record volumes", err, nil)
		}
		newest, version := map[string]string{}, map[string]int{}
		for _, v := range resp.Volumes {
			id := v.Labels[records.LabelRecord]
			n, err := strconv.Atoi(v.Labels[legacyVersion])
			if id == "" || err != nil || n <= version[id] {
				continue
			}
			newest[id], version[id] = v.Labels[legacyData], n
		}
		imported := 0
		for id, data := range newest {
			_, err := store.PutRecord(ctx, id, "", []byte(data), scoped)
			if errors.Is(err, records.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			imported++
		}
		if len(newest) > 0 {
			log.InfoContext(ctx, "imported sandboxes' settings and share links from the record volumes of an earlier version; the volumes are no longer used",
				"records", imported, "remove_with", "docker volume rm $(docker volume ls -q --filter label="+records.LabelRecord+")")
		}
		return nil
	})
}
