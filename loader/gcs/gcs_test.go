package gcs

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

func modelObjects() []fakestorage.Object {
	return []fakestorage.Object{
		stored("models", "llama/config.json", `{"hidden_size": 4096}`),
		stored("models", "llama/weights/model-00001.safetensors", "first shard"),
		stored("models", "llama/weights/model-00002.safetensors", "second shard"),
		stored("models", "llama/empty/", ""),
		stored("models", "llama-2/config.json", `{"hidden_size": 8192}`),
		stored("models", "llamas", "a sibling object"),
		stored("models", "single.bin", "one object"),
		stored("models", "single.bin.bak", "its backup"),
		stored("models", "single.bin2/x", "a sibling folder"),
	}
}

func TestList(t *testing.T) {
	f := newFakeGCS(t, modelObjects()...)
	type file struct{ key, path string }
	for _, tc := range []struct {
		name   string
		prefix string
		want   []file
	}{{
		name:   "folder: an exact path prefix, placeholders skipped",
		prefix: "llama",
		want: []file{
			{"llama/config.json", "config.json"},
			{"llama/weights/model-00001.safetensors", "weights/model-00001.safetensors"},
			{"llama/weights/model-00002.safetensors", "weights/model-00002.safetensors"},
		},
	}, {
		name:   "folder with a trailing slash",
		prefix: "llama/",
		want: []file{
			{"llama/config.json", "config.json"},
			{"llama/weights/model-00001.safetensors", "weights/model-00001.safetensors"},
			{"llama/weights/model-00002.safetensors", "weights/model-00002.safetensors"},
		},
	}, {
		name:   "nested folder",
		prefix: "llama/weights",
		want: []file{
			{"llama/weights/model-00001.safetensors", "model-00001.safetensors"},
			{"llama/weights/model-00002.safetensors", "model-00002.safetensors"},
		},
	}, {
		name:   "single object, not the names it begins",
		prefix: "single.bin",
		want:   []file{{"single.bin", "single.bin"}},
	}, {
		name:   "single nested object",
		prefix: "llama/weights/model-00002.safetensors",
		want:   []file{{"llama/weights/model-00002.safetensors", "model-00002.safetensors"}},
	}, {
		name:   "whole bucket",
		prefix: "",
		want: []file{
			{"llama-2/config.json", "llama-2/config.json"},
			{"llama/config.json", "llama/config.json"},
			{"llama/weights/model-00001.safetensors", "llama/weights/model-00001.safetensors"},
			{"llama/weights/model-00002.safetensors", "llama/weights/model-00002.safetensors"},
			{"llamas", "llamas"},
			{"single.bin", "single.bin"},
			{"single.bin.bak", "single.bin.bak"},
			{"single.bin2/x", "single.bin2/x"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var want []loader.File
			for _, w := range tc.want {
				want = append(want, wantFile(t, f, "models", w.key, w.path))
			}
			got, err := emulated(t, f, "models", tc.prefix).List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&loader.Listing{Files: want}, got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListNotFound(t *testing.T) {
	f := newFakeGCS(t, modelObjects()...)
	f.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "empty"})
	for _, tc := range []struct {
		name, bucket, prefix string
		wantMsg              []string
	}{{
		name: "no object under the prefix", bucket: "models", prefix: "mistral",
		wantMsg: []string{"no objects at gs://models/mistral"},
	}, {
		name: "only names that begin with the prefix", bucket: "models", prefix: "llam",
		wantMsg: []string{"no objects at gs://models/llam", `"llama-2/config.json" is not under it`},
	}, {
		name: "only a folder placeholder", bucket: "models", prefix: "llama/empty",
		wantMsg: []string{"no objects at gs://models/llama/empty"},
	}, {
		name: "empty bucket", bucket: "empty", prefix: "",
		wantMsg: []string{"no objects at gs://empty/"},
	}, {
		name: "missing bucket", bucket: "missing", prefix: "llama",
		wantMsg: []string{"listing gs://missing/llama: HTTP 404"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := emulated(t, f, tc.bucket, tc.prefix).List(t.Context())
			if !errors.Is(err, loader.ErrNotFound) {
				t.Fatalf("List: got %v, want an error wrapping ErrNotFound", err)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("List: error %q does not say %q", err, m)
				}
			}
		})
	}
}

func TestListFollowsEveryPage(t *testing.T) {
	var objs []fakestorage.Object
	var want []string
	for i := range 23 {
		name := fmt.Sprintf("m/shard-%02d", i)
		objs = append(objs, stored("models", name, name))
		want = append(want, name)
	}
	f := newFakeGCS(t, objs...)
	s := emulated(t, f, "models", "m")
	s.pageSize = 5
	got, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, file := range got.Files {
		keys = append(keys, file.Key)
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("listed keys (-want +got):\n%s", diff)
	}
	var tokens int
	for _, r := range f.requests() {
		if r.URL.Query().Get("maxResults") != "5" {
			t.Errorf("request %s does not ask for pages of 5", r.URL)
		}
		if r.URL.Query().Get("pageToken") != "" {
			tokens++
		}
	}
	if tokens != 4 {
		t.Errorf("got %d requests with a page token, want 4 (5 pages of 5)", tokens)
	}
}

func TestOpenRanges(t *testing.T) {
	content := make([]byte, 1000)
	for i := range content {
		content[i] = byte(i*7 + i/256)
	}
	name := "dir/with space+plus%25#?.bin"
	f := newFakeGCS(t, stored("models", name, string(content)))
	s := emulated(t, f, "models", "dir")
	l, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Files) != 1 || l.Files[0].Key != name {
		t.Fatalf("listed %+v, want %q alone", l.Files, name)
	}
	file := &l.Files[0]
	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"whole object", 0, 1000},
		{"first byte", 0, 1},
		{"start", 0, 300},
		{"middle", 123, 456},
		{"end", 600, 400},
		{"last byte", 999, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readRange(t, s, file, tc.off, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, content[tc.off:tc.off+tc.n]) {
				t.Errorf("bytes %d+%d: got %d bytes that differ from the content", tc.off, tc.n, len(got))
			}
		})
	}
	for _, r := range f.requests()[1:] {
		if got := r.URL.Query().Get("ifGenerationMatch"); got != file.Version {
			t.Errorf("request %s: ifGenerationMatch %q, want %q", r.URL, got, file.Version)
		}
	}
}

func TestOpenReadsGzipObjectsAsStored(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte("compressible tokenizer vocabulary "), 200))
	_ = zw.Close()
	obj := stored("models", "m/tokenizer.json", gz.String())
	obj.ContentEncoding = "gzip"
	f := newFakeGCS(t, obj)
	s := emulated(t, f, "models", "m")
	l, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]loader.File{wantFile(t, f, "models", "m/tokenizer.json", "tokenizer.json")}, l.Files); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	size := int64(gz.Len())
	for _, r := range [][2]int64{{0, size}, {10, size - 10}} {
		got, err := readRange(t, s, &l.Files[0], r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, gz.Bytes()[r[0]:]) {
			t.Errorf("bytes %d+%d are not the stored gzip bytes", r[0], r[1])
		}
	}
}

func TestOpenAfterReplace(t *testing.T) {
	f := newFakeGCS(t, stored("models", "m/model.safetensors", "version one"))
	s := emulated(t, f, "models", "m")
	l, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readRange(t, s, &l.Files[0], 0, 4); err != nil {
		t.Fatalf("before the replace: %v", err)
	}
	f.srv.CreateObject(stored("models", "m/model.safetensors", "version two"))
	_, err = readRange(t, s, &l.Files[0], 4, 4)
	if !errors.Is(err, loader.ErrVerification) || !strings.Contains(err.Error(), "object changed during download") {
		t.Errorf("after the replace: got %v, want ErrVerification saying the object changed", err)
	}
}

func TestStatusErrors(t *testing.T) {
	f := newFakeGCS(t, stored("models", "m/a.bin", "some bytes"))
	s := emulated(t, f, "models", "m")
	l, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	file := &l.Files[0]
	ops := map[string]func() error{
		"list": func() error { _, err := s.List(t.Context()); return err },
		"open": func() error { _, err := readRange(t, s, file, 0, 2); return err },
	}
	for _, tc := range []struct {
		name       string
		status     int
		header     http.Header
		body       string
		want       error
		retryAfter time.Duration
		wantMsg    []string
	}{{
		name: "401", status: http.StatusUnauthorized, want: loader.ErrAccessDenied,
		body:    `{"error":{"code":401,"message":"Anonymous caller does not have storage.objects.list access."}}`,
		wantMsg: []string{"HTTP 401", "sent with no credentials (STORAGE_EMULATOR_HOST is set)", "GCS says: Anonymous caller does not have"},
	}, {
		name: "403", status: http.StatusForbidden, want: loader.ErrAccessDenied,
		wantMsg: []string{"HTTP 403", "sent with no credentials (STORAGE_EMULATOR_HOST is set)"},
	}, {
		name: "404", status: http.StatusNotFound, want: loader.ErrNotFound,
		wantMsg: []string{"HTTP 404"},
	}, {
		name: "503 with Retry-After", status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {"7"}},
		retryAfter: 7 * time.Second, wantMsg: []string{"HTTP 503"},
	}, {
		name: "429", status: http.StatusTooManyRequests, body: "{\"error\":{\"message\":\"slow\\ndown\"}}",
		wantMsg: []string{"HTTP 429", "GCS says: slow down"},
	}} {
		for op, do := range ops {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				f.setIntercept(func(w http.ResponseWriter, _ *http.Request) bool {
					for k, v := range tc.header {
						w.Header()[k] = v
					}
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.body))
					return true
				})
				defer f.setIntercept(nil)
				err := do()
				if err == nil {
					t.Fatal("got no error")
				}
				after, transient := loader.IsTransient(err)
				if tc.want != nil && (!errors.Is(err, tc.want) || transient) {
					t.Errorf("got %v, want an error wrapping %v", err, tc.want)
				}
				if tc.want == nil && (!transient || after != tc.retryAfter) {
					t.Errorf("got %v (transient %v, retry after %v), want transient after %v", err, transient, after, tc.retryAfter)
				}
				where := map[string]string{"list": "listing gs://models/m: ", "open": "reading gs://models/m/a.bin: "}[op]
				for _, m := range append([]string{where}, tc.wantMsg...) {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not say %q", err, m)
					}
				}
			})
		}
	}
}

func TestListRejectsCollidingPaths(t *testing.T) {
	f := newFakeGCS(t, stored("models", "m/m", "the object"), stored("models", "m/m/m", "an object below it"))
	_, err := emulated(t, f, "models", "m/m").List(t.Context())
	if !errors.Is(err, loader.ErrInvalid) || !strings.Contains(err.Error(), `objects "m/m" and "m/m/m" both map to "m"`) {
		t.Errorf("got %v, want ErrInvalid naming both objects", err)
	}
}

func TestEmulatorEndpoint(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unset", "", ""},
		{"host and port", "localhost:4443", "http://localhost:4443"},
		{"http URL", "http://gcs:4443/", "http://gcs:4443"},
		{"https URL", "https://gcs.example", "https://gcs.example"},
		{"URL with a path", "http://proxy:80/gcs/", "http://proxy:80/gcs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := emulatorEndpoint(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("emulatorEndpoint(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
