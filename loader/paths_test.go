package loader

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	tests := map[string]struct {
		in, want, err string
	}{
		"nested":         {in: "a/b/model.safetensors", want: "a/b/model.safetensors"},
		"dots in a name": {in: "a/..b/c..", want: "a/..b/c.."},
		"spaces":         {in: "my model/x y.bin", want: "my model/x y.bin"},
		"empty":          {in: "", err: "must not be empty"},
		"parent":         {in: "../x", err: `".."`},
		"inner parent":   {in: "a/../../x", err: `".."`},
		"dot":            {in: "./x", err: `"."`},
		"absolute":       {in: "/etc/passwd", err: "must be relative"},
		"double slash":   {in: "a//b", err: "empty"},
		"trailing slash": {in: "a/", err: "empty"},
		"backslash":      {in: `a\..\..\x`, err: "backslash"},
		"nul":            {in: "a\x00b", err: "NUL"},
		"control":        {in: "a\nb", err: "control"},
		"invalid utf-8":  {in: "a\xffb", err: "UTF-8"},
		"state dir":      {in: ".modelgate/manifest.json", err: "keeps for itself"},
		"hf cache":       {in: ".cache/x", err: "keeps for itself"},
		"too long":       {in: strings.Repeat("a", MaxPathLength+1), err: "longer than"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := CleanPath(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("CleanPath(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("CleanPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestRelativeKey(t *testing.T) {
	tests := map[string]struct {
		prefix, key, want string
		ok                bool
	}{
		"under":             {prefix: "models/llama", key: "models/llama/config.json", want: "config.json", ok: true},
		"sibling":           {prefix: "models/llama", key: "models/llama-2/config.json"},
		"longer name":       {prefix: "models/llama", key: "models/llamas"},
		"the object":        {prefix: "models/llama.bin", key: "models/llama.bin", want: "llama.bin", ok: true},
		"slash: only under": {prefix: "models/llama/", key: "models/llama/a", want: "a", ok: true},
		"slash: not itself": {prefix: "models/llama/", key: "models/llama/"},
		"whole bucket":      {prefix: "", key: "a/b", want: "a/b", ok: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := RelativeKey(tc.prefix, tc.key)
			if ok != tc.ok || got != tc.want {
				t.Errorf("RelativeKey(%q, %q) = %q, %t; want %q, %t", tc.prefix, tc.key, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzKeyToPath: whatever a source lists under whatever prefix, a key
// either is refused or becomes a path inside the destination that is not
// the loader's own.
func FuzzKeyToPath(f *testing.F) {
	for _, seed := range [][2]string{
		{"models/llama", "models/llama/config.json"},
		{"models/llama", "models/llama/../../etc/passwd"},
		{"", "/abs/x"},
		{"a/", "a/.modelgate/manifest.json"},
		{"a", "a/b\\..\\c"},
		{"m", "m/.cache/huggingface/hub/x"},
		{"p", "p//x"},
		{"p", "p/./x"},
		{"", "x/\x00/y"},
	} {
		f.Add(seed[0], seed[1])
	}
	dest := filepath.Join(string(filepath.Separator), "dest")
	f.Fuzz(func(t *testing.T, prefix, key string) {
		rel, ok := RelativeKey(prefix, key)
		if !ok {
			return
		}
		p, err := CleanPath(rel)
		if err != nil {
			return
		}
		full := filepath.Join(dest, filepath.FromSlash(p))
		if !strings.HasPrefix(full, dest+string(filepath.Separator)) {
			t.Fatalf("key %q under %q became %q, outside %s", key, prefix, full, dest)
		}
		for _, r := range reserved {
			if full == filepath.Join(dest, r) || strings.HasPrefix(full, filepath.Join(dest, r)+string(filepath.Separator)) {
				t.Fatalf("key %q under %q became %q, in the loader's own %s", key, prefix, full, r)
			}
		}
		if p != filepath.ToSlash(filepath.Clean(p)) {
			t.Fatalf("CleanPath(%q) = %q, not clean", rel, p)
		}
	})
}
