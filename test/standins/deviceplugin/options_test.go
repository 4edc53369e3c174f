package deviceplugin

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestOptionsDefaults(t *testing.T) {
	got := Options{Devices: 2}.withDefaults()
	want := Options{
		ResourceName: "nvidia.com/gpu",
		Devices:      2,
		UUIDPrefix:   "modelgate",
		PluginDir:    "/var/lib/kubelet/device-plugins/",
		SocketName:   "modelgate-gpu.sock",
		PollInterval: 500 * time.Millisecond,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Options{}, "Log")); diff != "" {
		t.Errorf("withDefaults (-want +got):\n%s", diff)
	}
	if err := got.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	if diff := cmp.Diff([]string{"GPU-modelgate-0", "GPU-modelgate-1"}, got.deviceIDs()); diff != "" {
		t.Errorf("deviceIDs (-want +got):\n%s", diff)
	}
	if got, want := got.socketPath(), "/var/lib/kubelet/device-plugins/modelgate-gpu.sock"; got != want {
		t.Errorf("socketPath = %q, want %q", got, want)
	}
}

func TestOptionsValidate(t *testing.T) {
	long := "/tmp/" + strings.Repeat("d", 100)
	tests := map[string]struct {
		opts Options
		want []string // each must be in the error; none means valid
	}{
		"valid": {opts: Options{Devices: 8, UUIDPrefix: "node-1", ResourceName: "example.com/gpu"}},
		"no devices": {
			opts: Options{},
			want: []string{"devices 0 must be a positive integer"},
		},
		"resource name without a domain": {
			opts: Options{Devices: 1, ResourceName: "gpu"},
			want: []string{`resource name "gpu" must be an extended resource name`},
		},
		"resource name not qualified": {
			opts: Options{Devices: 1, ResourceName: "nvidia.com/g p u"},
			want: []string{`resource name "nvidia.com/g p u"`},
		},
		"comma in the prefix": {
			opts: Options{Devices: 1, UUIDPrefix: "a,b"},
			want: []string{`uuid prefix "a,b" can only hold letters, digits and '-'`},
		},
		"relative plugin directory": {
			opts: Options{Devices: 1, PluginDir: "device-plugins"},
			want: []string{`plugin directory "device-plugins" must be an absolute path`},
		},
		"socket name is the kubelet's": {
			opts: Options{Devices: 1, SocketName: "kubelet.sock"},
			want: []string{`socket name "kubelet.sock" is the kubelet's`},
		},
		"socket name is a path": {
			opts: Options{Devices: 1, SocketName: "a/b.sock"},
			want: []string{`socket name "a/b.sock" must be a file name, not a path`},
		},
		"socket path too long": {
			opts: Options{Devices: 1, PluginDir: long},
			want: []string{"more than a unix socket address holds (107)"},
		},
		"negative poll interval": {
			opts: Options{Devices: 1, PollInterval: -time.Second},
			want: []string{"poll interval -1s must not be negative"},
		},
		"every problem at once": {
			opts: Options{Devices: -1, UUIDPrefix: "a b", SocketName: "kubelet.sock"},
			want: []string{"devices -1", `uuid prefix "a b"`, `socket name "kubelet.sock"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.withDefaults().validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("validate: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
