package deviceplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	var (
		none      fileID
		own       = fileID{dev: 1, ino: 10, mtime: 100}
		ownNew    = fileID{dev: 1, ino: 10, mtime: 200} // same inode, made again
		kubelet   = fileID{dev: 1, ino: 20, mtime: 100}
		kubeletNw = fileID{dev: 1, ino: 21, mtime: 300}
	)
	tests := map[string]struct {
		state keeperState
		obs   observation
		want  plan
	}{
		"registered, nothing changed": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{own: own, kubelet: kubelet},
			want:  plan{},
		},
		"serving, no kubelet yet": {
			state: keeperState{serving: own},
			obs:   observation{own: own},
			want:  plan{},
		},
		"serving, kubelet came": {
			state: keeperState{serving: own},
			obs:   observation{own: own, kubelet: kubelet},
			want:  plan{register: true},
		},
		"kubelet socket gone": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{own: own},
			want:  plan{unregister: true},
		},
		"kubelet restarted, plugin socket kept": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{own: own, kubelet: kubeletNw},
			want:  plan{unregister: true, register: true},
		},
		"kubelet restarted and wiped the plugin socket": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{own: none, kubelet: kubeletNw},
			want:  plan{relisten: true, unregister: true, register: true},
		},
		"kubelet wiped the directory, not listening yet": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{},
			want:  plan{relisten: true, unregister: true},
		},
		"plugin socket removed, same kubelet": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{kubelet: kubelet},
			want:  plan{relisten: true, unregister: true, register: true},
		},
		"plugin socket replaced by another file": {
			state: keeperState{serving: own, registeredWith: kubelet},
			obs:   observation{own: ownNew, kubelet: kubelet},
			want:  plan{relisten: true, unregister: true, register: true},
		},
		"not serving (listening failed before)": {
			state: keeperState{},
			obs:   observation{kubelet: kubelet},
			want:  plan{relisten: true, register: true},
		},
		"not serving, no kubelet": {
			state: keeperState{},
			obs:   observation{},
			want:  plan{relisten: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decide(tc.state, tc.obs), cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}
