package v1alpha1

import (
	"strings"
	"testing"
)

func TestCheckLoaderArgs(t *testing.T) {
	cases := map[string]struct {
		args      []string
		wantIndex int
		wantErr   string // part of the message; "" for none
	}{
		"uri and dest":         {args: []string{"storage", "cp", "-r", "{{uri}}/*", "{{dest}}"}},
		"uri inside an arg":    {args: []string{"--source={{uri}}", "--to={{dest}}/weights"}},
		"uri twice, no dest":   {args: []string{"{{uri}}", "{{uri}}"}},
		"braces that are text": {args: []string{"{{uri}}", "}}", "{", "}{"}},
		"unknown placeholder": {args: []string{"cp", "{{uri}}", "{{path}}"}, wantIndex: 2,
			wantErr: "unknown placeholder {{path}}: the placeholders are {{uri}} and {{dest}}"},
		"spaces are not allowed": {args: []string{"{{ uri }}"}, wantIndex: 0, wantErr: "unknown placeholder {{ uri }}"},
		"a Go template":          {args: []string{"{{uri}}", "--format={{.Name}}"}, wantIndex: 1, wantErr: "unknown placeholder {{.Name}}"},
		"unclosed":               {args: []string{"{{uri}}", "{{dest"}, wantIndex: 1, wantErr: `has a "{{" that does not close`},
		"no uri":                 {args: []string{"cp", "{{dest}}"}, wantIndex: -1, wantErr: "must use {{uri}} in at least one argument"},
		"empty list":             {args: []string{}, wantIndex: -1, wantErr: "must use {{uri}}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			i, err := CheckLoaderArgs(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckLoaderArgs(%q): %v", tc.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || i != tc.wantIndex {
				t.Fatalf("CheckLoaderArgs(%q) = %d, %v; want %d and an error saying %q", tc.args, i, err, tc.wantIndex, tc.wantErr)
			}
		})
	}
}
