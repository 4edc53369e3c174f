package annotations

import "testing"

func TestParseModelMountDeliveries(t *testing.T) {
	for in, want := range map[string]struct {
		path     string
		delivery Delivery
		bad      bool
	}{
		"/models":                 {path: "/models"},
		"image-volume":            {delivery: DeliveryImageVolume},
		"image-volume:/mnt/model": {path: "/mnt/model", delivery: DeliveryImageVolume},
		"loader:/data":            {path: "/data", delivery: DeliveryLoader},
		"image-volume:relative":   {bad: true},
		"imagevolume":             {bad: true},
	} {
		p, d, err := ParseModelMount(in)
		if (err != nil) != want.bad || p != want.path || d != want.delivery {
			t.Errorf("ParseModelMount(%q) = %q, %q, %v; want %q, %q, error %v", in, p, d, err, want.path, want.delivery, want.bad)
		}
	}
}
