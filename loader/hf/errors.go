package hf

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"

	"github.com/modelgate/modelgate/loader"
)

// The X-Error-Code values huggingface_hub reads (utils/_http.py).
const (
	codeRepoNotFound     = "RepoNotFound"
	codeRevisionNotFound = "RevisionNotFound"
	codeEntryNotFound    = "EntryNotFound"
	codeGatedRepo        = "GatedRepo"
	// msgInvalidToken is the X-Error-Message of a token the Hub does not
	// know: the one 401 that is not a missing or private repository.
	msgInvalidToken = "Invalid credentials in Authorization header" //nolint:gosec // the Hub's error message, not a credential
)

// credentialsHint says where a token goes.
const credentialsHint = "HF_TOKEN in the Secret named by modelgate.io/model-credentials " +
	"(a key of another name: map it with modelgate.io/model-credentials-keys: HF_TOKEN=<key>)"

// check returns nil for a 2xx answer; otherwise it closes the body and
// reads the failure as huggingface_hub does, from X-Error-Code and
// X-Error-Message (never the body, which may echo a signed URL). what
// names the request (the model, or a file of it); file is the file
// asked for, "" for a listing.
func (s *Source) check(resp *http.Response, what, file string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	code := resp.Header.Get("X-Error-Code")
	msg := oneLine(resp.Header.Get("X-Error-Message"), 300)
	fail := func(kind error, format string, args ...any) error {
		drain(resp)
		return fmt.Errorf("%s: HTTP %s: %s: %w", what, resp.Status, fmt.Sprintf(format, args...), kind)
	}
	switch {
	case code == codeRepoNotFound,
		// The Hub answers 401 for a missing or private repository when
		// no token (or a token without access) is sent.
		code == "" && resp.StatusCode == http.StatusUnauthorized && msg != msgInvalidToken && s.fromHub(resp):
		if s.token == "" {
			return fail(loader.ErrNotFound, "the repository does not exist, or is private and needs a token: put %s", credentialsHint)
		}
		return fail(loader.ErrNotFound, "the repository does not exist, or is private and the token from %s cannot read it", s.tokenVar)
	case code == codeRevisionNotFound:
		return fail(loader.ErrNotFound, "the repository has no branch, tag or commit %q", s.rev)
	case code == codeEntryNotFound && file != "":
		return fail(loader.ErrNotFound, "the revision has no file %q", file)
	case code == codeEntryNotFound:
		return fail(loader.ErrNotFound, "the Hub found no such entry")
	case code == codeGatedRepo && s.token == "":
		return fail(loader.ErrAccessDenied, "the repository is gated: accept its terms on the Hub (%s/%s) and use a token of an account that did: put %s",
			s.base, s.repo, credentialsHint)
	case code == codeGatedRepo:
		return fail(loader.ErrAccessDenied, "the repository is gated and the account of the token from %s has no access: "+
			"accept its terms on the Hub (%s/%s) with that account, or use a token of an account that did", s.tokenVar, s.base, s.repo)
	case resp.StatusCode == http.StatusUnauthorized && msg == msgInvalidToken && s.token != "":
		return fail(loader.ErrAccessDenied, "the Hub rejected the token from %s as invalid", s.tokenVar)
	}
	err := loader.CheckStatus(resp, what)
	var notes []string
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		if s.token == "" || !s.fromHub(resp) {
			notes = append(notes, "sent without a token")
		} else {
			notes = append(notes, "sent with the token from "+s.tokenVar)
		}
	}
	if msg != "" && msg != http.StatusText(resp.StatusCode) {
		notes = append(notes, "the Hub says: "+msg)
	}
	if len(notes) > 0 {
		err = fmt.Errorf("%w (%s)", err, strings.Join(notes, "; "))
	}
	return err
}

// fromHub reports whether the answer came from the endpoint's origin
// (not from a CDN a redirect led to).
func (s *Source) fromHub(resp *http.Response) bool {
	return resp.Request != nil && resp.Request.URL != nil && sameOrigin(resp.Request.URL, s.endpoint)
}

// drain discards a little of the body, so the connection can be reused,
// and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// oneLine replaces control characters in s by spaces and cuts it after
// limit runes.
func oneLine(s string, limit int) string {
	s = strings.TrimSpace(strings.Join(strings.FieldsFunc(s, unicode.IsControl), " "))
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "..."
	}
	return s
}
