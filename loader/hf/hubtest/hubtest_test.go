package hubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader/loadertest"
)

const (
	// helloOID is `echo "hello world" | git hash-object --stdin`.
	helloOID = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
	token    = "hf_token"
)

var (
	hello = File{Path: "hello.txt", Content: loadertest.Bytes([]byte("hello world\n"))}
	big   = File{Path: "weights/model.bin", Content: loadertest.Generated(7, 600_001), LFS: true}
)

func newServer(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	t.Cleanup(s.Close)
	s.AddRepo("org/public", OneCommit(hello, big))
	s.AddRepo("org/private", Repo{Commits: map[string][]File{CommitID("p"): {hello}}, Refs: map[string]string{"main": CommitID("p")}, Private: true, Tokens: []string{token}})
	s.AddRepo("org/gated", Repo{Commits: map[string][]File{CommitID("g"): {hello}}, Refs: map[string]string{"main": CommitID("g")}, Gated: true, Tokens: []string{token}})
	return s
}

// get sends a GET without following redirects; the caller closes the
// body.
func get(t *testing.T, s *Server, u string, h map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	c := *s.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestErrors(t *testing.T) {
	tests := map[string]struct {
		path, token string
		wantStatus  int
		wantCode    string
	}{
		"public":                         {path: "/api/models/org/public/revision/main", wantStatus: 200},
		"missing repository":             {path: "/api/models/org/nope/revision/main", wantStatus: 401, wantCode: "RepoNotFound"},
		"missing repository, token":      {path: "/api/models/org/nope/revision/main", token: token, wantStatus: 404, wantCode: "RepoNotFound"},
		"private":                        {path: "/api/models/org/private/tree/main", wantStatus: 401, wantCode: "RepoNotFound"},
		"private, token":                 {path: "/api/models/org/private/tree/main", token: token, wantStatus: 200},
		"invalid token":                  {path: "/api/models/org/public/revision/main", token: "hf_bad", wantStatus: 401},
		"missing revision":               {path: "/api/models/org/public/revision/v9", wantStatus: 404, wantCode: "RevisionNotFound"},
		"missing entry":                  {path: "/org/public/resolve/main/nope.txt", wantStatus: 404, wantCode: "EntryNotFound"},
		"missing tree path":              {path: "/api/models/org/public/tree/main/nope", wantStatus: 404, wantCode: "EntryNotFound"},
		"gated info is public":           {path: "/api/models/org/gated/revision/main", wantStatus: 200},
		"gated download":                 {path: "/org/gated/resolve/main/hello.txt", wantStatus: 401, wantCode: "GatedRepo"},
		"gated download, accepted token": {path: "/org/gated/resolve/main/hello.txt", token: token, wantStatus: 200},
		"other route":                    {path: "/api/spaces/org/public", wantStatus: 404},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, WithTokens("hf_other"))
			h := map[string]string{}
			if tc.token != "" {
				h["Authorization"] = "Bearer " + tc.token
			}
			resp := get(t, s, s.URL()+tc.path, h)
			defer resp.Body.Close()
			got := [2]any{resp.StatusCode, resp.Header.Get("X-Error-Code")}
			if diff := cmp.Diff([2]any{tc.wantStatus, tc.wantCode}, got); diff != "" {
				t.Errorf("status, X-Error-Code (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("gated download, token that did not accept", func(t *testing.T) {
		s := newServer(t, WithTokens("hf_other"))
		resp := get(t, s, s.URL()+"/org/gated/resolve/main/hello.txt", map[string]string{"Authorization": "Bearer hf_other"})
		defer resp.Body.Close()
		if resp.StatusCode != 403 || resp.Header.Get("X-Error-Code") != "GatedRepo" {
			t.Errorf("status %d, X-Error-Code %q, want 403 GatedRepo", resp.StatusCode, resp.Header.Get("X-Error-Code"))
		}
	})
}

func TestTree(t *testing.T) {
	s := newServer(t, WithPageSize(1))
	var got []treeEntry
	next := s.URL() + "/api/models/org/public/tree/main?recursive=true"
	for pages := 0; next != ""; pages++ {
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		resp := get(t, s, next, nil)
		defer resp.Body.Close()
		var page []treeEntry
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		next = ""
		if l := resp.Header.Get("Link"); l != "" {
			next = strings.TrimPrefix(strings.TrimSuffix(l, `>; rel="next"`), "<")
		}
	}
	data, _ := io.ReadAll(big.Content.Reader())
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	pointer := "version https://git-lfs.github.com/spec/v1\noid sha256:" + sha + "\nsize 600001\n"
	want := []treeEntry{
		{Type: "file", OID: helloOID, Size: 12, Path: "hello.txt"},
		{Type: "directory", OID: got[1].OID, Path: "weights"},
		{Type: "file", OID: gitOID(loadertest.Bytes([]byte(pointer)), int64(len(pointer))), Size: 600001, Path: "weights/model.bin",
			LFS: &lfsInfo{OID: sha, Size: 600001, PointerSize: int64(len(pointer))}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
	resp := get(t, s, s.URL()+"/api/models/org/public/tree/main/weights", nil)
	defer resp.Body.Close()
	if b := body(t, resp); !strings.Contains(b, `"path":"weights/model.bin"`) || resp.Header.Get("Link") != "" {
		t.Errorf("tree of weights = %s, Link %q, want model.bin on one page", b, resp.Header.Get("Link"))
	}
}

func TestResolve(t *testing.T) {
	s := newServer(t, WithTLS())
	commit := OneCommit(hello, big).Refs["main"]

	resp := get(t, s, s.URL()+"/org/public/resolve/main/hello.txt", map[string]string{"Range": "bytes=6-10"})
	defer resp.Body.Close()
	got := []string{resp.Status, resp.Header.Get("ETag"), resp.Header.Get("X-Repo-Commit"), body(t, resp)}
	if diff := cmp.Diff([]string{"206 Partial Content", `"` + helloOID + `"`, commit, "world"}, got); diff != "" {
		t.Errorf("regular file (-want +got):\n%s", diff)
	}

	resp = get(t, s, s.URL()+"/org/public/resolve/"+commit+"/weights/model.bin", nil)
	defer resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, s.CDNURL()+"/") || resp.Header.Get("X-Linked-Size") != "600001" {
		t.Fatalf("LFS file: %s to %q, X-Linked-Size %q; want 302 to the CDN", resp.Status, loc, resp.Header.Get("X-Linked-Size"))
	}
	resp = get(t, s, loc, map[string]string{"Range": "bytes=599999-"})
	defer resp.Body.Close()
	data, _ := io.ReadAll(big.Content.Reader())
	if b := body(t, resp); resp.StatusCode != http.StatusPartialContent || b != string(data[599999:]) {
		t.Errorf("CDN range: %s with %d bytes, want 206 with the last 2", resp.Status, len(b))
	}
	resp = get(t, s, loc, map[string]string{"Authorization": "Bearer " + token})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("CDN with a token: %s, want 400", resp.Status)
	}
	resp = get(t, s, strings.Replace(loc, "Signature=", "Signature=0", 1), nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("CDN with a bad signature: %s, want 403", resp.Status)
	}
	want := map[string]int{"": 2, "Bearer " + token: 1}
	if diff := cmp.Diff(want, s.Authorizations(RouteCDN)); diff != "" {
		t.Errorf("CDN Authorization headers (-want +got):\n%s", diff)
	}
}

func TestRename(t *testing.T) {
	s := newServer(t)
	s.Rename("org/public", "neworg/public")
	resp := get(t, s, s.URL()+"/api/models/org/public/tree/main?recursive=true", nil)
	defer resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusTemporaryRedirect || loc != "/api/models/neworg/public/tree/main?recursive=true" {
		t.Errorf("renamed: %s to %q, want 307 to the new name", resp.Status, loc)
	}
	resp = get(t, s, s.URL()+"/org/public/resolve/main/hello.txt", nil)
	defer resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "/neworg/public/resolve/main/hello.txt" {
		t.Errorf("renamed resolve: %s to %q", resp.Status, loc)
	}
}

func TestFaults(t *testing.T) {
	s := newServer(t)
	s.Inject(Fault{Route: RouteRevision, Skip: 1, Times: 2, Status: http.StatusTooManyRequests, RetryAfter: 5})
	s.Inject(Fault{Route: RouteResolve, CutAfter: 4})
	u := s.URL() + "/api/models/org/public/revision/main"
	var got []string
	for range 4 {
		resp := get(t, s, u, nil)
		defer resp.Body.Close()
		got = append(got, resp.Status+" "+resp.Header.Get("Retry-After"))
	}
	want := []string{"200 OK ", "429 Too Many Requests 5", "429 Too Many Requests 5", "200 OK "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	resp := get(t, s, s.URL()+"/org/public/resolve/main/hello.txt", nil)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil || string(b) != "hell" {
		t.Errorf("cut body: %q, %v; want \"hell\" and an error", b, err)
	}
	if got := s.Requests(RouteRevision); got != 4 {
		t.Errorf("revision requests = %d, want 4", got)
	}
}
