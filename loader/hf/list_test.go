package hf

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
)

func TestListRevisions(t *testing.T) {
	hub := newHub(t)
	c1, c2 := hubtest.CommitID("first"), hubtest.CommitID("second")
	hub.AddRepo("org/model", hubtest.Repo{
		Commits: map[string][]hubtest.File{c1: {configJSON, weights}, c2: {configJSON, readme, tokenizer, weights}},
		Refs:    map[string]string{"main": c2, "v1.0": c1, "refs/pr/1": c1},
	})
	want := func(ref, commit string, files ...hubtest.File) *loader.Listing {
		l := &loader.Listing{Revision: commit, HF: &loader.HFRepo{ID: "org/model", Ref: ref, Commit: commit}}
		for _, f := range files {
			l.Files = append(l.Files, listed(t, f))
		}
		sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
		return l
	}
	tests := map[string]struct {
		rev  string
		want *loader.Listing
	}{
		"default branch":   {rev: "", want: want("main", c2, configJSON, readme, tokenizer, weights)},
		"branch":           {rev: "main", want: want("main", c2, configJSON, readme, tokenizer, weights)},
		"tag":              {rev: "v1.0", want: want("v1.0", c1, configJSON, weights)},
		"full commit":      {rev: c1, want: want(c1, c1, configJSON, weights)},
		"pull request ref": {rev: "refs/pr/1", want: want("refs/pr/1", c1, configJSON, weights)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := newSource(t, hub, "org/model", tc.rev, nil).List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("listing (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListPagination(t *testing.T) {
	files := []hubtest.File{configJSON, readme, weights, tokenizer, shard,
		{Path: "a/b/c/d.txt", Content: configJSON.Content}}
	// 6 files and 6 directories (a, a/b, a/b/c, onnx, onnx/fp16, tokenizer).
	const entries = 12
	var want []loader.File
	for _, f := range files {
		want = append(want, listed(t, f))
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Path < want[j].Path })
	for name, pageSize := range map[string]int{"one per page": 1, "two per page": 2, "five per page": 5, "one page": 1000} {
		t.Run(name, func(t *testing.T) {
			hub := newHub(t, hubtest.WithPageSize(pageSize))
			hub.AddRepo("org/model", hubtest.OneCommit(files...))
			got, err := newSource(t, hub, "org/model", "", nil).List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff(want, got.Files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if got, want := hub.Requests(hubtest.RouteTree), (entries+pageSize-1)/pageSize; got != want {
				t.Errorf("tree requests = %d, want %d", got, want)
			}
		})
	}
}

func TestListErrors(t *testing.T) {
	const other, accepted = "hf_other_account", "hf_accepted_account"
	tests := map[string]struct {
		repo, rev string
		env       map[string]string
		faults    []hubtest.Fault
		// wantKind is the sentinel the error wraps, nil for success.
		wantKind       error
		wantTransient  bool
		wantRetryAfter time.Duration
		wantMsg        []string
	}{
		"public": {repo: "org/public"},
		"missing repository without token": {repo: "org/nope", wantKind: loader.ErrNotFound,
			wantMsg: []string{"hf://org/nope", "HTTP 401", "does not exist, or is private and needs a token", "HF_TOKEN in the Secret named by modelgate.io/model-credentials"}},
		"missing repository with token": {repo: "org/nope", env: map[string]string{"HF_TOKEN": secretToken}, wantKind: loader.ErrNotFound,
			wantMsg: []string{"hf://org/nope", "HTTP 404", "does not exist, or is private and the token from HF_TOKEN cannot read it"}},
		"private without token": {repo: "org/private", wantKind: loader.ErrNotFound,
			wantMsg: []string{"hf://org/private", "needs a token"}},
		"private with another account's token": {repo: "org/private", env: map[string]string{"HF_TOKEN": other}, wantKind: loader.ErrNotFound,
			wantMsg: []string{"the token from HF_TOKEN cannot read it"}},
		"private with HF_TOKEN":               {repo: "org/private", env: map[string]string{"HF_TOKEN": secretToken}},
		"private with HUGGING_FACE_HUB_TOKEN": {repo: "org/private", env: map[string]string{"HUGGING_FACE_HUB_TOKEN": secretToken}},
		// A Secret given whole (envFrom), its key named as Secrets name it.
		"private with a Secret's hf_api_token": {repo: "org/private", env: map[string]string{"hf_api_token": secretToken}},
		"private with a Secret's token":        {repo: "org/private", env: map[string]string{"token": secretToken}},
		"private with a token that is not the Hub's": {repo: "org/private", env: map[string]string{"token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"},
			wantKind: loader.ErrNotFound, wantMsg: []string{"needs a token", "modelgate.io/model-credentials-keys: HF_TOKEN=<key>"}},
		"invalid token from hf_token": {repo: "org/public", env: map[string]string{"hf_token": "hf_unknown_" + secretToken}, wantKind: loader.ErrAccessDenied,
			wantMsg: []string{"rejected the token from hf_token"}},
		"missing revision": {repo: "org/public", rev: "nope", wantKind: loader.ErrNotFound,
			wantMsg: []string{"hf://org/public@nope", `no branch, tag or commit "nope"`}},
		"gated without token": {repo: "org/gated", wantKind: loader.ErrAccessDenied,
			wantMsg: []string{"hf://org/gated", "HTTP 401", "is gated", "accept its terms on the Hub", "/org/gated", "HF_TOKEN in the Secret"}},
		"gated with a token that did not accept": {repo: "org/gated", env: map[string]string{"HF_TOKEN": other}, wantKind: loader.ErrAccessDenied,
			wantMsg: []string{"HTTP 403", "is gated", "the token from HF_TOKEN has no access"}},
		"gated with a token that accepted": {repo: "org/gated", env: map[string]string{"HF_TOKEN": accepted}},
		"invalid token": {repo: "org/public", env: map[string]string{"HF_TOKEN": "hf_unknown_" + secretToken}, wantKind: loader.ErrAccessDenied,
			wantMsg: []string{"rejected the token from HF_TOKEN"}},
		"rate limited": {repo: "org/public", faults: []hubtest.Fault{{Route: hubtest.RouteRevision, Status: 429, RetryAfter: 7}},
			wantTransient: true, wantRetryAfter: 7 * time.Second, wantMsg: []string{"hf://org/public", "429"}},
		"server error on the second page": {repo: "org/public", faults: []hubtest.Fault{{Route: hubtest.RouteTree, Skip: 1, Status: 503}},
			wantTransient: true, wantMsg: []string{"hf://org/public: listing files", "503"}},
		"page cut short": {repo: "org/public", faults: []hubtest.Fault{{Route: hubtest.RouteTree, CutAfter: 20}},
			wantTransient: true, wantMsg: []string{"listing files"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hub := newHub(t, hubtest.WithPageSize(2), hubtest.WithTokens(other))
			hub.AddRepo("org/public", hubtest.OneCommit(configJSON, readme, weights))
			private := hubtest.OneCommit(configJSON, weights)
			private.Private, private.Tokens = true, []string{secretToken}
			hub.AddRepo("org/private", private)
			gated := hubtest.OneCommit(configJSON, weights)
			gated.Gated, gated.Tokens = true, []string{accepted}
			hub.AddRepo("org/gated", gated)
			for _, f := range tc.faults {
				hub.Inject(f)
			}
			l, err := newSource(t, hub, tc.repo, tc.rev, tc.env).List(context.Background())
			if tc.wantKind == nil && !tc.wantTransient {
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				if len(l.Files) == 0 {
					t.Fatalf("List listed no files")
				}
				return
			}
			if err == nil {
				t.Fatalf("List succeeded, want an error")
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("List error %q does not wrap %v", err, tc.wantKind)
			}
			after, transient := loader.IsTransient(err)
			if transient != tc.wantTransient || after != tc.wantRetryAfter {
				t.Errorf("List error %q: transient %t after %s, want %t after %s", err, transient, after, tc.wantTransient, tc.wantRetryAfter)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("List error %q does not say %q", err, m)
				}
			}
			if strings.Contains(err.Error(), secretToken) {
				t.Errorf("List error %q shows the token", err)
			}
		})
	}
}
