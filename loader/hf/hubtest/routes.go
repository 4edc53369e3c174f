package hubtest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// request is a Hub request taken apart.
type request struct {
	route Route
	id    string // org/name
	rev   string
	path  string // the file or directory, unescaped
	// prefix and suffix are the escaped URL path around the id, to
	// redirect a renamed repository.
	prefix, suffix string
}

// parse classifies a request by its escaped path, so that a revision
// such as refs%2Fpr%2F1 stays one segment.
func parse(r *http.Request) request {
	esc := r.URL.EscapedPath()
	segs := strings.Split(strings.TrimPrefix(esc, "/"), "/")
	unescape := func(ss []string) (string, bool) {
		out := make([]string, len(ss))
		for i, s := range ss {
			u, err := url.PathUnescape(s)
			if err != nil {
				return "", false
			}
			out[i] = u
		}
		return strings.Join(out, "/"), true
	}
	var req request
	switch {
	case len(segs) >= 6 && segs[0] == "api" && segs[1] == "models" && (segs[4] == "revision" || segs[4] == "tree"):
		req = request{route: RouteRevision, id: segs[2] + "/" + segs[3], prefix: "/api/models/", suffix: "/" + strings.Join(segs[4:], "/")}
		if segs[4] == "tree" {
			req.route = RouteTree
		} else if len(segs) != 6 {
			return request{route: RouteOther}
		}
		rev, ok1 := unescape(segs[5:6])
		p, ok2 := unescape(segs[6:])
		if !ok1 || !ok2 {
			return request{route: RouteOther}
		}
		req.rev, req.path = rev, p
	case len(segs) >= 5 && segs[0] != "api" && segs[2] == "resolve":
		req = request{route: RouteResolve, id: segs[0] + "/" + segs[1], prefix: "/", suffix: "/" + strings.Join(segs[2:], "/")}
		rev, ok1 := unescape(segs[3:4])
		p, ok2 := unescape(segs[4:])
		if !ok1 || !ok2 || p == "" {
			return request{route: RouteOther}
		}
		req.rev, req.path = rev, p
	default:
		return request{route: RouteOther}
	}
	return req
}

// The X-Error-Code values huggingface_hub reads.
const (
	codeRepoNotFound     = "RepoNotFound"
	codeRevisionNotFound = "RevisionNotFound"
	codeEntryNotFound    = "EntryNotFound"
	codeGatedRepo        = "GatedRepo"
	// msgInvalidToken is the X-Error-Message of an unknown token.
	msgInvalidToken = "Invalid credentials in Authorization header" //nolint:gosec // the Hub's error message, not a credential
)

// hubError answers as the Hub does: X-Error-Code and X-Error-Message
// headers, and the message as JSON.
func hubError(w http.ResponseWriter, status int, code, msg string) {
	h := w.Header()
	if code != "" {
		h.Set("X-Error-Code", code)
	}
	h.Set("X-Error-Message", msg)
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// answerFault applies a fault: a status, or a writer that cuts the body.
func answerFault(w http.ResponseWriter, f *Fault) (http.ResponseWriter, bool) {
	if f == nil {
		return w, false
	}
	if f.Status != 0 {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		hubError(w, f.Status, "", http.StatusText(f.Status))
		return w, true
	}
	return &cutWriter{ResponseWriter: w, left: f.CutAfter}, false
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	req := parse(r)
	w, done := answerFault(w, s.record(req.route, r))
	if done {
		return
	}
	if req.route == RouteOther || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		hubError(w, http.StatusNotFound, "", "Sorry, we can't find the page you are looking for.")
		return
	}
	token, ok := bearer(r)
	s.mu.Lock()
	valid := s.tokens[token]
	s.mu.Unlock()
	if !ok || (token != "" && !valid) {
		hubError(w, http.StatusUnauthorized, "", msgInvalidToken)
		return
	}
	rp, renamedTo := s.lookup(req.id)
	if renamedTo != "" {
		loc := req.prefix + renamedTo + req.suffix
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	if rp == nil || (rp.private && !rp.tokens[token]) {
		status := http.StatusUnauthorized
		if token != "" {
			status = http.StatusNotFound
		}
		hubError(w, status, codeRepoNotFound, "Repository not found")
		return
	}
	c := rp.resolve(req.rev)
	if c == nil {
		hubError(w, http.StatusNotFound, codeRevisionNotFound, "Invalid rev id: "+req.rev)
		return
	}
	switch req.route {
	case RouteRevision:
		s.serveRevision(w, rp, c)
	case RouteTree:
		s.serveTree(w, r, c, req.path)
	default:
		if rp.gated && !rp.tokens[token] {
			if token == "" {
				hubError(w, http.StatusUnauthorized, codeGatedRepo,
					"Access to model "+rp.id+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
			} else {
				hubError(w, http.StatusForbidden, codeGatedRepo,
					"Access to model "+rp.id+" is restricted and you are not in the authorized list. Visit "+s.URL()+"/"+rp.id+" to ask for access.")
			}
			return
		}
		s.serveResolve(w, r, c, req.path)
	}
}

// serveRevision answers a revision's info, as model_info reads it.
func (s *Server) serveRevision(w http.ResponseWriter, rp *repo, c *commit) {
	type sibling struct {
		RFilename string `json:"rfilename"`
	}
	siblings := []sibling{}
	for _, p := range c.paths() {
		siblings = append(siblings, sibling{p})
	}
	var gated any = false
	if rp.gated {
		gated = "manual"
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"_id": c.id[:24], "id": rp.id, "modelId": rp.id, "sha": c.id,
		"private": rp.private, "gated": gated, "disabled": false,
		"lastModified": time.Unix(0, 0).UTC().Format(time.RFC3339), "tags": []string{}, "siblings": siblings,
	})
}

// serveTree answers one page of the tree under dir, with a Link to the
// next page (cursor: the last path sent) while there is one.
func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, c *commit, dir string) {
	q := r.URL.Query()
	recursive := q.Get("recursive") == "true" || q.Get("recursive") == "True" || q.Get("recursive") == "1"
	prefix := ""
	if dir != "" {
		if !c.isDir(dir) {
			hubError(w, http.StatusNotFound, codeEntryNotFound, dir+" does not exist on \""+c.id+"\"")
			return
		}
		prefix = dir + "/"
	}
	var sel []treeEntry
	for _, e := range c.entries() {
		rest, ok := strings.CutPrefix(e.Path, prefix)
		if ok && (recursive || !strings.Contains(rest, "/")) {
			sel = append(sel, e)
		}
	}
	start := 0
	if cur := q.Get("cursor"); cur != "" {
		last, err := base64.RawURLEncoding.DecodeString(cur)
		if err != nil {
			hubError(w, http.StatusBadRequest, "", "Invalid cursor")
			return
		}
		start = sort.Search(len(sel), func(i int) bool { return sel[i].Path > string(last) })
	}
	end := min(start+s.pageSize, len(sel))
	if end < len(sel) {
		q.Set("cursor", base64.RawURLEncoding.EncodeToString([]byte(sel[end-1].Path)))
		w.Header().Set("Link", "<"+s.URL()+r.URL.EscapedPath()+"?"+q.Encode()+`>; rel="next"`)
	}
	page := sel[start:end]
	if page == nil {
		page = []treeEntry{}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(page)
}

// serveResolve serves a file: its bytes for a regular file, a redirect
// to the CDN for an LFS file.
func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, c *commit, p string) {
	b := c.files[p]
	if b == nil {
		hubError(w, http.StatusNotFound, codeEntryNotFound, "Entry not found")
		return
	}
	b.digests()
	h := w.Header()
	h.Set("X-Repo-Commit", c.id)
	h.Set("ETag", `"`+b.oid+`"`)
	if !b.LFS {
		serveContent(w, r, b.Content, &s.bytesServed, s.limiter.Load())
		return
	}
	s.mu.Lock()
	s.blobs[b.SHA256] = b
	s.mu.Unlock()
	h.Set("X-Linked-Etag", `"`+b.SHA256+`"`)
	h.Set("X-Linked-Size", strconv.FormatInt(b.Content.Size(), 10))
	h.Set("Location", s.signedURL(b.SHA256))
	w.WriteHeader(http.StatusFound)
}
