package version

import "testing"

func TestIsRelease(t *testing.T) {
	cases := map[string]struct {
		in   string
		want bool
	}{
		"release":                     {in: "v1.2.0", want: true},
		"zero major":                  {in: "v0.4.1", want: true},
		"release candidate":           {in: "v1.3.0-rc.1", want: true},
		"beta":                        {in: "v2.0.0-beta2", want: true},
		"dev":                         {in: "dev", want: false},
		"empty":                       {in: "", want: false},
		"no v":                        {in: "1.2.0", want: false},
		"two numbers":                 {in: "v1.2", want: false},
		"leading zero":                {in: "v1.02.0", want: false},
		"git describe past a tag":     {in: "v1.2.0-3-gabc1234", want: false},
		"git describe past, modified": {in: "v1.2.0-3-gabc1234-dirty", want: false},
		"tagged, modified tree":       {in: "v1.2.0-dirty", want: false},
		"pre-release, modified tree":  {in: "v1.3.0-rc.1.dirty", want: false},
		"no tag at all":               {in: "abc1234", want: false},
		"no tag, modified":            {in: "abc1234-dirty", want: false},
		"build metadata":              {in: "v1.2.0+build.5", want: false},
		"trailing newline":            {in: "v1.2.0\n", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsRelease(tc.in); got != tc.want {
				t.Errorf("IsRelease(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
