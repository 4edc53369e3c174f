package hf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/modelgate/modelgate/loader"
)

// maxJSONBytes bounds a revision's info or a page of the tree.
const maxJSONBytes = 64 << 20

// maxPages bounds the pages of a tree listing.
const maxPages = 100_000

var (
	commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// List implements loader.Source: the revision resolved to a commit, and
// every file of the commit's tree. A gated repository is checked for
// access here, so that a missing grant fails before any download.
func (s *Source) List(ctx context.Context) (*loader.Listing, error) {
	info, err := s.revisionInfo(ctx)
	if err != nil {
		return nil, err
	}
	files, err := s.tree(ctx, info.SHA)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s has no files at commit %s: %w", s.uri(), info.SHA, loader.ErrNotFound)
	}
	if info.isGated() {
		if err := s.probeAccess(ctx, info.SHA, &files[0]); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.commit = info.SHA
	s.mu.Unlock()
	return &loader.Listing{
		Revision: info.SHA,
		Files:    files,
		HF:       &loader.HFRepo{ID: s.repo, Ref: s.rev, Commit: info.SHA},
	}, nil
}

// modelInfo is what List reads of a revision's info.
type modelInfo struct {
	SHA   string          `json:"sha"`
	Gated json.RawMessage `json:"gated"`
}

// isGated reads "gated": false, or "auto" or "manual" when it is.
func (m *modelInfo) isGated() bool {
	switch strings.TrimSpace(string(m.Gated)) {
	case "", "null", "false", `""`, `"false"`:
		return false
	}
	return true
}

// revisionInfo resolves the revision to a commit, as model_info does:
// GET /api/models/{repo}/revision/{revision}.
func (s *Source) revisionInfo(ctx context.Context) (*modelInfo, error) {
	u := s.base + "/api/models/" + s.repo + "/revision/" + url.PathEscape(s.rev)
	resp, err := s.get(ctx, s.client, http.MethodGet, u, s.uri(), jsonHeader())
	if err != nil {
		return nil, err
	}
	if err := s.check(resp, s.uri(), ""); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info modelInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBytes)).Decode(&info); err != nil {
		return nil, decodeError(fmt.Errorf("%s: reading the revision's info: %w", s.uri(), err))
	}
	info.SHA = strings.ToLower(info.SHA)
	if !commitRE.MatchString(info.SHA) {
		return nil, fmt.Errorf("%s: the Hub resolved the revision to %q, not a 40-hex commit", s.uri(), info.SHA)
	}
	return &info, nil
}

// decodeError marks a JSON body cut short or lost with its connection as
// Transient; JSON that is not what the Hub sends is not.
func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return err
	}
	return loader.Retryable(err, 0)
}

func jsonHeader() http.Header { return http.Header{"Accept": {"application/json"}} }

// treeEntry is an entry of the tree API.
type treeEntry struct {
	Type string `json:"type"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	Path string `json:"path"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// tree lists the commit's files, as list_repo_tree does: GET
// /api/models/{repo}/tree/{commit}?recursive=true, then every page a
// Link rel="next" names.
func (s *Source) tree(ctx context.Context, commit string) ([]loader.File, error) {
	what := s.uri() + ": listing files"
	next := s.base + "/api/models/" + s.repo + "/tree/" + commit + "?recursive=true"
	seen := map[string]bool{}
	var files []loader.File
	for next != "" {
		if seen[next] || len(seen) >= maxPages {
			return nil, fmt.Errorf("%s: the Hub's pages do not end (%d read)", what, len(seen))
		}
		seen[next] = true
		resp, err := s.get(ctx, s.client, http.MethodGet, next, what, jsonHeader())
		if err != nil {
			return nil, err
		}
		if err := s.check(resp, what, ""); err != nil {
			return nil, err
		}
		var entries []treeEntry
		err = json.NewDecoder(io.LimitReader(resp.Body, maxJSONBytes)).Decode(&entries)
		_ = resp.Body.Close()
		if err != nil {
			return nil, decodeError(fmt.Errorf("%s: reading page %d: %w", what, len(seen), err))
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			f, err := e.file()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			files = append(files, f)
		}
		if next, err = nextLink(resp.Header, resp.Request.URL); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return files, nil
}

// file is the entry as the loader lists it: an LFS file vouched for by
// its SHA-256, any other by its git blob id.
func (e *treeEntry) file() (loader.File, error) {
	f := loader.File{Path: e.Path, Size: e.Size, Key: e.Path}
	if e.LFS != nil {
		oid := strings.ToLower(e.LFS.OID)
		if !sha256RE.MatchString(oid) {
			return f, fmt.Errorf("the Hub lists %q with LFS oid %q, not a SHA-256", e.Path, e.LFS.OID)
		}
		f.Size = e.LFS.Size
		f.Digests = []loader.Digest{{Algorithm: loader.SHA256, Hex: oid}}
		f.Version = oid
		return f, nil
	}
	oid := strings.ToLower(e.OID)
	if !commitRE.MatchString(oid) {
		return f, fmt.Errorf("the Hub lists %q with oid %q, not a git blob id", e.Path, e.OID)
	}
	f.Digests = []loader.Digest{{Algorithm: loader.GitSHA1, Hex: oid}}
	f.Version = oid
	return f, nil
}

// nextLink is the URL of the Link header's rel="next", resolved against
// the page's URL; "" when there is none.
func nextLink(h http.Header, page *url.URL) (string, error) {
	for _, v := range h.Values("Link") {
		for v = strings.TrimSpace(v); strings.HasPrefix(v, "<"); {
			end := strings.IndexByte(v, '>')
			if end < 0 {
				return "", fmt.Errorf("malformed Link header %q", v)
			}
			target := v[1:end]
			params := v[end+1:]
			rest := ""
			if i := strings.IndexByte(params, '<'); i >= 0 {
				params, rest = params[:i], params[i:]
			}
			if isNext(params) {
				u, err := url.Parse(target)
				if err != nil {
					return "", fmt.Errorf("malformed next page URL in the Link header: %w", err)
				}
				if page != nil {
					u = page.ResolveReference(u)
				}
				if u.Scheme != "http" && u.Scheme != "https" {
					return "", errors.New("the Link header's next page is not an http or https URL")
				}
				return u.String(), nil
			}
			v = rest
		}
	}
	return "", nil
}

// isNext reports whether a link's parameters (`; rel="next",`) hold the
// relation next.
func isNext(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(p), ",")), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
			continue
		}
		for r := range strings.FieldsSeq(strings.Trim(strings.TrimSpace(val), `"`)) {
			if strings.EqualFold(r, "next") {
				return true
			}
		}
	}
	return false
}
