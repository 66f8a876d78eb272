package docker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/previewgate/previewgate/sandboxmgr/runtime"
)

// The scope lock: one live gateway per engine and scope. A volume named
// previewgate-lock-<scope stamp>, never mounted, carries its holder's
// labels (data dir owner, host, pid, start time). Volume names are unique
// and a create of an existing name answers the existing volume, so of
// gateways starting together the first creator holds it. A gateway finding
// it held by another data dir pings the holder: it creates a ping volume,
// which a live holder removes at once (watching volume events, and listing
// every lockPoll as a backstop). A ping still there after pingWait, or a
// holder whose process is gone (same machine and pid namespace), means the
// holder is gone: the lock is taken over; a live holder refuses this one
// (ErrScopeTaken). The holder's own data dir takes it over at once (holding
// the data dir's file lock). A clean exit removes it.
//
// Two gateways taking over a dead holder's lock at once can both believe
// they hold it for up to lockPoll: each checks every lockPoll that the lock
// carries its nonce, and the one that finds another's exits (Lost).
const (
	labelLock      = "previewgate.lock" // the scope stamp
	labelLockOwner = "previewgate.lock.owner"
	labelLockNonce = "previewgate.lock.nonce" // one per process
	labelLockHost  = "previewgate.lock.host"
	labelLockPID   = "previewgate.lock.pid"
	labelLockProc  = "previewgate.lock.proc" // where the pid means something
	labelLockSince = "previewgate.lock.since"
	labelPing      = "previewgate.lock.ping" // on a ping: the scope stamp
)

var (
	// lockPoll is how often a holder lists pings and checks its lock.
	lockPoll = time.Second
	// pingWait is how long a live holder may take to answer a ping.
	pingWait = 5 * time.Second
	// lockFirstTry bounds the first try; later tries run in the background.
	lockFirstTry = 30 * time.Second
)

// ErrScopeTaken: a live gateway of the same scope on another data dir
// serves the engine.
var ErrScopeTaken = errors.New("another gateway serves this scope on this Docker engine")

// scopeLock is one gateway's hold on its scope.
type scopeLock struct {
	cli        *client.Client
	name       string // the lock volume
	pingPrefix string
	scope      string            // for messages
	labels     map[string]string // the lock's, as this gateway makes it
	pingLabels map[string]string
	owner      string
	nonce      string
	log        *slog.Logger
	lost       func(error)

	cancel context.CancelFunc
	done   chan struct{} // closed when run returned
	held   atomic.Bool   // the lock is this gateway's: it answers pings
}

// lockScope takes the scope lock of labels for owner; ErrScopeTaken if a
// live gateway of another data dir holds it. An unreachable engine does
// not stop the gateway: the lock is taken in the background, and lost is
// called if it turns out held or is taken over later.
func lockScope(ctx context.Context, cli *client.Client, labels map[string]string, owner string, lost func(error), log *slog.Logger) (*scopeLock, error) {
	if lost == nil {
		lost = func(error) {}
	}
	stamp := runtime.Stamp(labels)
	host, _ := os.Hostname()
	l := &scopeLock{cli: cli, name: "previewgate-lock-" + stamp, pingPrefix: "previewgate-ping-" + stamp + "-",
		scope: cmp.Or(labels[runtime.LabelInstance], stamp), owner: owner, nonce: randomHex(8), log: log, lost: lost,
		done: make(chan struct{})}
	l.labels = maps.Clone(labels)
	if l.labels == nil {
		l.labels = map[string]string{}
	}
	l.pingLabels = maps.Clone(l.labels)
	l.pingLabels[labelPing] = stamp
	maps.Copy(l.labels, map[string]string{labelLock: stamp, labelLockOwner: owner, labelLockNonce: l.nonce,
		labelLockHost: host, labelLockPID: strconv.Itoa(os.Getpid()), labelLockProc: procID(),
		labelLockSince: time.Now().UTC().Format(time.RFC3339)})

	tctx, cancel := context.WithTimeout(ctx, lockFirstTry)
	err := l.acquire(tctx)
	cancel()
	switch {
	case err == nil:
		l.held.Store(true)
	case errors.Is(err, ErrScopeTaken):
		return nil, err
	case ctx.Err() != nil:
		return nil, fmt.Errorf("scope lock: %w", ctx.Err())
	default:
		log.WarnContext(ctx, "scope lock not taken yet: serving, and taking it once the engine answers", "lock", l.name, "err", err)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = stop
	go l.run(bg)
	return l, nil
}

// acquire takes the lock, or returns ErrScopeTaken (wrapped, saying whose
// it is) if a live gateway of another data dir holds it.
func (l *scopeLock) acquire(ctx context.Context) error {
	for range 5 {
		v, err := l.cli.VolumeCreate(ctx, volume.CreateOptions{Name: l.name, Driver: "local", Labels: l.labels})
		if err != nil {
			return classify("create scope lock "+l.name, err, nil)
		}
		switch {
		case v.Labels[labelLockNonce] == l.nonce:
			l.log.InfoContext(ctx, "scope lock taken: this gateway serves its scope on this engine", "lock", l.name, "scope", l.scope)
			return nil
		case v.Labels[labelLockOwner] == l.owner:
			// Left by this data dir's earlier gateway, which is gone; made
			// again to name the new holder (its pid).
			l.log.InfoContext(ctx, "scope lock left by this data dir's previous gateway: taking it", "lock", l.name)
		default:
			alive, how, err := l.alive(ctx, v)
			if err != nil {
				return err
			}
			if alive {
				return l.refusal(v, how)
			}
			l.log.WarnContext(ctx, "scope lock holder is gone: taking the scope over", "lock", l.name,
				"holder", v.Labels[labelLockOwner], "host", v.Labels[labelLockHost], "pid", v.Labels[labelLockPID], "why", how)
		}
		if err := l.removeIfNonce(ctx, v.Labels[labelLockNonce]); err != nil {
			return err
		}
	}
	return fmt.Errorf("scope lock %s: still changing hands after 5 tries", l.name)
}

// alive asks whether the holder of lock v lives, and says how it knows.
func (l *scopeLock) alive(ctx context.Context, v volume.Volume) (bool, string, error) {
	if procGone(v.Labels) {
		return false, "its process is gone", nil
	}
	ping := l.pingPrefix + randomHex(8)
	if _, err := l.cli.VolumeCreate(ctx, volume.CreateOptions{Name: ping, Driver: "local", Labels: l.pingLabels}); err != nil {
		return false, "", classify("create ping "+ping, err, nil)
	}
	t0 := time.Now()
	for time.Since(t0) < pingWait {
		if err := runtime.Sleep(ctx, 20*time.Millisecond); err != nil {
			return false, "", err
		}
		_, err := l.cli.VolumeInspect(ctx, ping)
		if cerrdefs.IsNotFound(err) {
			return true, "it answered a ping in " + time.Since(t0).Round(time.Millisecond).String(), nil
		}
		if err != nil {
			return false, "", classify("inspect ping "+ping, err, nil)
		}
	}
	if err := l.cli.VolumeRemove(ctx, ping, true); err != nil && !cerrdefs.IsNotFound(err) {
		return false, "", classify("remove ping "+ping, err, nil)
	}
	return false, "it did not answer a ping within " + pingWait.String(), nil
}

// refusal says why this gateway may not serve, and what to do instead.
func (l *scopeLock) refusal(v volume.Volume, how string) error {
	return fmt.Errorf("%w: scope %q is served by the gateway of data dir %s on host %s (pid %s, since %s; %s). "+
		"A Docker engine is served by one gateway per scope, so this one exits. For more replicas use the Kubernetes "+
		"runtime (docs/kubernetes.md); to replace a gateway (a rolling restart), start the new one on the same data_dir: "+
		"it waits as a standby and takes over when the old one exits",
		ErrScopeTaken, l.scope, v.Labels[labelLockOwner], v.Labels[labelLockHost], v.Labels[labelLockPID], v.Labels[labelLockSince], how)
}

// removeIfNonce removes the lock if it still carries nonce (gone: nil).
func (l *scopeLock) removeIfNonce(ctx context.Context, nonce string) error {
	v, err := l.cli.VolumeInspect(ctx, l.name)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return classify("inspect scope lock "+l.name, err, nil)
	}
	if v.Labels[labelLockNonce] != nonce {
		return nil
	}
	if err := l.cli.VolumeRemove(ctx, l.name, true); err != nil && !cerrdefs.IsNotFound(err) {
		return classify("remove scope lock "+l.name, err, nil)
	}
	return nil
}

// run takes the lock if the start could not, then holds it: it answers
// pings and checks the lock every lockPoll until ctx ends or it is lost.
func (l *scopeLock) run(ctx context.Context) {
	defer close(l.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	answering := false
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		var err error
		if !l.held.Load() {
			if err = l.acquire(ctx); err == nil {
				l.held.Store(true)
			} else if !errors.Is(err, ErrScopeTaken) {
				err = nil // the engine still away: try again
			}
		}
		if l.held.Load() {
			if !answering {
				// Once the engine answered: the SDK's events call reads the
				// negotiated API version unguarded.
				answering = true
				wg.Go(func() { l.answerEvents(ctx) })
			}
			err = l.check(ctx)
		}
		if err != nil && ctx.Err() == nil {
			l.held.Store(false)
			l.lost(err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check answers the pings it finds and makes sure the lock is still this
// gateway's: made again if it went, an error if another took it over.
func (l *scopeLock) check(ctx context.Context) error {
	pings, err := l.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", labelPing+"="+l.pingLabels[labelPing]))})
	if err != nil {
		return nil // the engine away: nobody can ping either
	}
	for _, p := range pings.Volumes {
		if p != nil {
			_ = l.cli.VolumeRemove(ctx, p.Name, true)
		}
	}
	v, err := l.cli.VolumeInspect(ctx, l.name)
	if cerrdefs.IsNotFound(err) {
		v, err = l.cli.VolumeCreate(ctx, volume.CreateOptions{Name: l.name, Driver: "local", Labels: l.labels})
	}
	if err != nil || v.Labels[labelLockNonce] == l.nonce {
		return nil
	}
	return fmt.Errorf("%w: the gateway of data dir %s on host %s (pid %s) took scope %q over; this one had not answered "+
		"its ping in time or its lock was removed, and exits", ErrScopeTaken, v.Labels[labelLockOwner], v.Labels[labelLockHost], v.Labels[labelLockPID], l.scope)
}

// answerEvents removes ping volumes of the scope as soon as they are made.
func (l *scopeLock) answerEvents(ctx context.Context) {
	f := filters.NewArgs(filters.Arg("type", string(events.VolumeEventType)), filters.Arg("event", string(events.ActionCreate)))
	for ctx.Err() == nil {
		msgs, errs := l.cli.Events(ctx, events.ListOptions{Filters: f})
	stream:
		for {
			select {
			case m := <-msgs:
				if strings.HasPrefix(m.Actor.ID, l.pingPrefix) {
					_ = l.cli.VolumeRemove(ctx, m.Actor.ID, true)
				}
			case <-errs:
				break stream
			case <-ctx.Done():
				return
			}
		}
		_ = runtime.Sleep(ctx, lockPoll)
	}
}

// close stops holding and, if the lock is still this gateway's, removes it.
func (l *scopeLock) close() {
	l.cancel()
	<-l.done
	if l.held.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.removeIfNonce(ctx, l.nonce); err != nil {
			l.log.Warn("scope lock not removed: the next gateway of this scope pings it first", "lock", l.name, "err", err)
		}
	}
}

// procID says where a pid means something: the boot and pid namespace
// ("" where /proc does not tell).
func procID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + strings.Trim(ns, "pid:[]")
}

// procGone: the holder ran in this boot and pid namespace, and its
// process is gone (a pid in use again counts as alive: it is pinged).
func procGone(labels map[string]string) bool {
	pid, err := strconv.Atoi(labels[labelLockPID])
	if err != nil || pid <= 0 || labels[labelLockProc] == "" || labels[labelLockProc] != procID() {
		return false
	}
	_, err = os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
