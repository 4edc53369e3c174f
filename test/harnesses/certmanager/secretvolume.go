package certmanager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretVolume keeps a folder equal to a Secret's keys as the kubelet
// keeps a Pod's secret volume: each key a symlink to ..data/<key>, and
// ..data a symlink switched at once to a new folder holding every key, so
// a reader never sees one key of the old Secret beside one of the new.
// modelgate runs here as a process, not in a Pod: this is the Deployment's
// mount of the Secret cert-manager writes.
type SecretVolume struct {
	dir    string
	key    client.ObjectKey
	c      client.Reader
	mu     sync.Mutex
	last   map[string][]byte
	writes int
	done   chan struct{}
	err    error
}

// secretPoll is how often a SecretVolume reads the Secret again. The
// kubelet syncs a volume on its pod sync period (a minute) plus its cache's
// TTL; a test wants the change sooner.
const secretPoll = 200 * time.Millisecond

// MountSecret waits until the Secret key exists, writes its keys to dir
// and keeps them current until ctx ends.
func MountSecret(ctx context.Context, c client.Reader, key client.ObjectKey, dir string) (*SecretVolume, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	v := &SecretVolume{dir: dir, key: key, c: c, done: make(chan struct{})}
	err := wait.PollUntilContextTimeout(ctx, secretPoll, startTimeout, true, func(ctx context.Context) (bool, error) {
		changed, err := v.sync(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return changed, err
	})
	if err != nil {
		return nil, fmt.Errorf("mounting Secret %s: %w", key, err)
	}
	go func() {
		defer close(v.done)
		err := wait.PollUntilContextCancel(ctx, secretPoll, false, func(ctx context.Context) (bool, error) {
			_, err := v.sync(ctx)
			return false, client.IgnoreNotFound(err)
		})
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			v.mu.Lock()
			v.err = err
			v.mu.Unlock()
		}
	}()
	return v, nil
}

// Dir is the volume's folder.
func (v *SecretVolume) Dir() string { return v.dir }

// Err is why the volume stopped following the Secret, if it did.
func (v *SecretVolume) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// sync writes the Secret's keys when they differ from the last written.
func (v *SecretVolume) sync(ctx context.Context) (bool, error) {
	s := &corev1.Secret{}
	if err := v.c.Get(ctx, v.key, s); err != nil {
		return false, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.last != nil && reflect.DeepEqual(v.last, s.Data) {
		return false, nil
	}
	if err := v.write(s.Data); err != nil {
		return false, err
	}
	v.last = maps.Clone(s.Data)
	return true, nil
}

// write is the kubelet's atomic writer, reduced: the new keys in a new
// folder, ..data switched to it by a rename, each key's symlink made once,
// and the old folder removed.
func (v *SecretVolume) write(data map[string][]byte) error {
	v.writes++
	gen := "..gen-" + strconv.Itoa(v.writes)
	genDir := filepath.Join(v.dir, gen)
	if err := os.Mkdir(genDir, 0o700); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if err := os.WriteFile(filepath.Join(genDir, k), data[k], 0o600); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	tmp := filepath.Join(v.dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(gen, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(v.dir, k)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
			return err
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(v.dir, old))
	}
	return nil
}
