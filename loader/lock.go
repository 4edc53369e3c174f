package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// The lock: loaders sharing a destination (a cache claim mounted by
// several Pods) elect one holder, which fetches while the others wait for
// the manifest. Holders are numbered: the holder is whoever created
// holder-<n> with the highest n, by an exclusive create, which is atomic
// on local filesystems and NFS alike (flock is not). A holder rewrites its
// file as it makes progress; a waiter that sees no change for
// TakeoverAfter creates holder-<n+1> and resumes from the checkpoints. A
// holder that finds a higher number stops.
const holderPrefix = "holder-"

// holderInfo is what a holder's file says.
type holderInfo struct {
	// Holder identifies the loader: the host name (the Pod's name) and a
	// random suffix.
	Holder string `json:"holder"`
	Host   string `json:"host"`
	// Seq changes whenever the holder makes progress.
	Seq      int64  `json:"seq"`
	Progress int64  `json:"progress"`
	Phase    string `json:"phase"`
}

// lease is a held lock.
type lease struct {
	root *os.Root
	gen  int
	info holderInfo

	mu   sync.Mutex
	lost bool
}

func holderName(gen int) string { return path.Join(StateDir, fmt.Sprintf("%s%08d", holderPrefix, gen)) }

// currentHolder returns the highest holder number and its info (0 when
// none).
func currentHolder(root *os.Root) (int, *holderInfo, error) {
	d, err := root.Open(StateDir)
	if err != nil {
		return 0, nil, err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return 0, nil, err
	}
	gen := 0
	for _, n := range names {
		if s, ok := strings.CutPrefix(n, holderPrefix); ok && !strings.HasSuffix(s, ".tmp") {
			if g, err := strconv.Atoi(s); err == nil && g > gen {
				gen = g
			}
		}
	}
	if gen == 0 {
		return 0, nil, nil
	}
	b, err := root.ReadFile(holderName(gen))
	if err != nil {
		return gen, &holderInfo{}, nil //nolint:nilerr // being replaced: no progress seen
	}
	var h holderInfo
	_ = json.Unmarshal(b, &h)
	return gen, &h, nil
}

// tryHold creates holder-<gen> exclusively; false when another loader did.
func tryHold(root *os.Root, gen int, info holderInfo) (*lease, bool, error) {
	f, err := root.OpenFile(holderName(gen), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, noSpace(err)
	}
	b, _ := json.Marshal(info)
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, false, noSpace(werr)
	}
	return &lease{root: root, gen: gen, info: info}, true, nil
}

// beat records progress in the holder's file and reports a lost lease.
func (l *lease) beat(progress int64, phase string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return errLostLease
	}
	if gen, _, err := currentHolder(l.root); err == nil && gen > l.gen {
		l.lost = true
		return errLostLease
	}
	if progress == l.info.Progress && phase == l.info.Phase {
		return nil
	}
	l.info.Seq++
	l.info.Progress, l.info.Phase = progress, phase
	b, _ := json.Marshal(l.info)
	tmp := holderName(l.gen) + ".tmp"
	if err := l.root.WriteFile(tmp, b, 0o644); err != nil {
		return noSpace(err)
	}
	return l.root.Rename(tmp, holderName(l.gen))
}

// release removes the holder's file.
func (l *lease) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lost {
		_ = l.root.Remove(holderName(l.gen))
	}
}

var errLostLease = errors.New("another loader took over this destination")

// acquire waits until this loader holds the destination, or another
// loader completed it (the manifest, returned), or ctx ends.
func acquire(ctx context.Context, root *os.Root, o *Options, hit func() *Manifest) (*lease, *Manifest, error) {
	log := logr.FromContextOrDiscard(ctx)
	me := holderInfo{Holder: o.Holder, Host: o.Host, Phase: "starting"}
	var (
		seen       *holderInfo
		seenGen    int
		changed    = time.Now()
		lastLogged time.Time
	)
	for {
		if m := hit(); m != nil {
			return nil, m, nil
		}
		gen, info, err := currentHolder(root)
		if err != nil {
			return nil, nil, err
		}
		takeover := gen == 0
		switch {
		case gen == 0:
		case info.Host != "" && info.Host == o.Host:
			// The same Pod's earlier loader: init containers run one at a
			// time, so it is dead (killed, OOM, node reboot).
			takeover = true
		case seen == nil || gen != seenGen || *info != *seen:
			seen, seenGen, changed = info, gen, time.Now()
		case time.Since(changed) >= o.TakeoverAfter:
			log.Info("taking over from a loader that made no progress", "holder", info.Holder, "for", time.Since(changed).Round(time.Second).String())
			takeover = true
		}
		if takeover {
			l, ok, err := tryHold(root, gen+1, me)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				if gen > 0 {
					_ = root.Remove(holderName(gen))
				}
				return l, nil, nil
			}
			continue
		}
		if time.Since(lastLogged) >= 10*time.Second {
			log.Info("waiting for another loader", "holder", info.Holder, "phase", info.Phase, "progressBytes", info.Progress)
			lastLogged = time.Now()
		}
		if err := Sleep(ctx, o.PollEvery); err != nil {
			return nil, nil, err
		}
	}
}
