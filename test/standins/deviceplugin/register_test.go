package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestRegisterRequest(t *testing.T) {
	tests := map[string]struct {
		opts Options
		want *pluginapi.RegisterRequest
	}{
		"defaults": {
			want: &pluginapi.RegisterRequest{
				Version:      "v1beta1",
				Endpoint:     "modelgate-gpu.sock",
				ResourceName: "nvidia.com/gpu",
				Options:      &pluginapi.DevicePluginOptions{},
			},
		},
		"other resource and socket": {
			opts: Options{ResourceName: "example.com/gpu", SocketName: "other.sock"},
			want: &pluginapi.RegisterRequest{
				Version:      "v1beta1",
				Endpoint:     "other.sock",
				ResourceName: "example.com/gpu",
				Options:      &pluginapi.DevicePluginOptions{},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := socketDir(t)
			k := startFakeKubelet(t, dir, 0)
			p := startPlugin(t, dir, tc.opts)
			if diff := cmp.Diff(tc.want, k.next(t), protocmp.Transform()); diff != "" {
				t.Errorf("RegisterRequest (-want +got):\n%s", diff)
			}
			waitRegistered(t, p)
		})
	}
}

func TestRegisterWhenKubeletComes(t *testing.T) {
	dir := socketDir(t)
	p := startPlugin(t, dir, Options{})

	ctx, cancel := context.WithTimeout(t.Context(), 5*testPoll)
	defer cancel()
	if err := p.WaitRegistered(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRegistered without a kubelet = %v, want context.DeadlineExceeded", err)
	}

	k := startFakeKubelet(t, dir, 0)
	k.next(t)
	waitRegistered(t, p)
}

func TestRegisterRetries(t *testing.T) {
	dir := socketDir(t)
	k := startFakeKubelet(t, dir, 3)
	p := startPlugin(t, dir, Options{})
	k.next(t)
	waitRegistered(t, p)
	if got := k.calls.Load(); got != 4 {
		t.Errorf("Register calls = %d, want 4 (3 refused, then accepted)", got)
	}
}

func TestReregister(t *testing.T) {
	tests := map[string]struct {
		restartKubelet     bool // a new kubelet.sock, as a restarted kubelet makes
		removePluginSocket bool // as the kubelet does when it starts
	}{
		"kubelet restart wipes the plugin socket": {restartKubelet: true, removePluginSocket: true},
		"kubelet restart keeps the plugin socket": {restartKubelet: true},
		"plugin socket removed":                   {removePluginSocket: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := socketDir(t)
			k := startFakeKubelet(t, dir, 0)
			p := startPlugin(t, dir, Options{})
			k.next(t)
			waitRegistered(t, p)
			before := statID(p.SocketPath())

			if tc.restartKubelet {
				k.stop()
				if exists(t, filepath.Join(dir, kubeletSocketName)) {
					t.Fatal("kubelet.sock still there after the fake kubelet stopped")
				}
				for deadline := time.Now().Add(waitFor); p.Registered(); time.Sleep(testPoll) {
					if time.Now().After(deadline) {
						t.Fatalf("still registered %s after kubelet.sock went", waitFor)
					}
				}
			}
			if tc.removePluginSocket {
				if err := os.Remove(p.SocketPath()); err != nil {
					t.Fatal(err)
				}
			}
			if tc.restartKubelet {
				k = startFakeKubelet(t, dir, 0)
			}

			// The fake kubelet accepts only once it has reached the plugin
			// through its endpoint, so this also proves the socket serves.
			if diff := cmp.Diff(registerRequest(Options{}.withDefaults()), k.next(t), protocmp.Transform()); diff != "" {
				t.Errorf("RegisterRequest (-want +got):\n%s", diff)
			}
			waitRegistered(t, p)
			after := statID(p.SocketPath())
			if after.absent() {
				t.Fatal("the plugin socket is not back")
			}
			if replaced := after != before; replaced != tc.removePluginSocket {
				t.Errorf("plugin socket replaced = %t, want %t", replaced, tc.removePluginSocket)
			}
		})
	}
}

func TestRetrier(t *testing.T) {
	var (
		t0  = time.Unix(1000, 0)
		ms  = time.Millisecond
		k1  = fileID{dev: 1, ino: 20, mtime: 100}
		k2  = fileID{dev: 1, ino: 21, mtime: 200}
		at  = func(d time.Duration) time.Time { return t0.Add(d) }
		r   = retrier{min: 100 * ms, max: 500 * ms}
		got []string
	)
	// step records whether an attempt through k is due at d, and fails it
	// if so.
	step := func(d time.Duration, k fileID) {
		due := r.due(at(d), k)
		got = append(got, fmt.Sprintf("%v %t", d, due))
		if due {
			r.failed(at(d), k)
		}
	}
	step(0, k1)      // first attempt: due; waits 100ms
	step(50*ms, k1)  // not yet
	step(100*ms, k1) // due; waits 200ms
	step(299*ms, k1) // not yet
	step(300*ms, k1) // due; waits 400ms
	step(700*ms, k1) // due; waits 500ms (max)
	step(1200*ms, k1)
	step(1300*ms, k2) // a new kubelet: due at once; waits 100ms again
	step(1350*ms, k2)
	step(1400*ms, k2)
	r.succeeded()
	step(1401*ms, k2) // after a success: due at once

	want := []string{"0s true", "50ms false", "100ms true", "299ms false", "300ms true", "700ms true",
		"1.2s true", "1.3s true", "1.35s false", "1.4s true", "1.401s true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}
