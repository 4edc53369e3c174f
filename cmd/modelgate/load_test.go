package main

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// hub is a fake Hub with a private repository readable with token.
func hub(t *testing.T, token string) (*hubtest.Server, string) {
	t.Helper()
	h := hubtest.New()
	t.Cleanup(h.Close)
	r := hubtest.OneCommit(
		hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte(`{"model_type":"llama"}`))},
		hubtest.File{Path: "model.safetensors", Content: loadertest.Generated(7, 3<<20), LFS: true},
		hubtest.File{Path: "tokenizer/tokenizer.json", Content: loadertest.Bytes([]byte(`{}`))},
	)
	r.Private, r.Tokens = true, []string{token}
	h.AddRepo("acme/tiny", r)
	return h, r.Refs["main"]
}

// invokeLoad runs `modelgate load` in process with a termination log file,
// as the kubelet provides one, and returns the exit code, the message and
// everything logged.
func invokeLoad(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	term := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(term, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(append([]string{"load", "--termination-log=" + term, "--stall-timeout=2s"}, args...), nil, &out, &errOut)
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	return code, string(msg), out.String() + errOut.String()
}

func TestLoadCommand(t *testing.T) {
	const token = "hf_secret_token_value"
	h, commit := hub(t, token)
	t.Setenv("HF_ENDPOINT", h.URL())
	t.Setenv("HF_TOKEN", token)
	dest := t.TempDir()
	uri := "hf://acme/tiny@main"

	code, msg, logs := invokeLoad(t, "--uri="+uri, "--dest="+dest)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, msg, logs)
	}
	if !regexp.MustCompile(`^loaded 3 files, 3\.1 MB in [0-9.]+ s \([0-9.]+ [kMG]?B/s\), revision ` + commit[:7] + `, verified$`).MatchString(msg) {
		t.Errorf("termination message = %q", msg)
	}
	snap := filepath.Join(dest, loader.HFCacheDir, "models--acme--tiny", "snapshots", commit, "config.json")
	if b, err := os.ReadFile(snap); err != nil || !strings.Contains(string(b), "llama") {
		t.Errorf("%s: %q, %v", snap, b, err)
	}

	// The same URI again, as cp and s5cmd are called (flags after the
	// arguments too): a cache hit, with no request to the Hub.
	h.ResetStats()
	code, msg, logs = invokeLoad(t, uri, dest, "--concurrency=4")
	if code != 0 || !strings.HasPrefix(msg, "already loaded: 3 files, 3.1 MB, revision "+commit[:7]+", verified") {
		t.Errorf("second load: exit %d, %q\n%s", code, msg, logs)
	}
	for _, r := range []hubtest.Route{hubtest.RouteRevision, hubtest.RouteTree, hubtest.RouteResolve, hubtest.RouteCDN} {
		if n := h.Requests(r); n != 0 {
			t.Errorf("a cache hit made %d %s requests", n, r)
		}
	}
	if strings.Contains(logs, token) {
		t.Errorf("the token is in the logs:\n%s", logs)
	}
}

func TestLoadCommandFailures(t *testing.T) {
	const token = "hf_secret_token_value"
	h, _ := hub(t, token)
	file := loadertest.Generated(3, 1000)
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "model.bin", time.Time{}, file.Reader())
	}))
	defer web.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: web.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args  []string
		token string
		code  int
		msg   string
	}{
		"no uri":                {args: []string{"--dest=/tmp/x"}, code: exitLoadInvalid, msg: "load failed (invalid): a URI and a directory are required (modelgate load URI DIR, or --uri and --dest)"},
		"one argument":          {args: []string{"hf://acme/tiny"}, code: exitLoadInvalid, msg: "takes a URI and a directory (modelgate load URI DIR), got 1 arguments"},
		"arguments and flags":   {args: []string{"hf://acme/tiny", "DEST", "--uri=hf://acme/other"}, code: exitLoadInvalid, msg: "given both as arguments and as --uri/--dest"},
		"bad uri":               {args: []string{"--uri=ftp://x/y", "--dest=DEST"}, code: exitLoadInvalid, msg: `unsupported scheme "ftp"`},
		"pvc":                   {args: []string{"--uri=pvc://claim/models", "--dest=DEST"}, code: exitLoadInvalid, msg: "mounted into the serving container, not loaded"},
		"bad part size":         {args: []string{"--uri=hf://acme/tiny", "--dest=DEST", "--part-size=1"}, code: exitLoadInvalid, msg: "--part-size"},
		"missing repo":          {args: []string{"--uri=hf://acme/nothing", "--dest=DEST"}, token: token, code: exitNotFound, msg: "acme/nothing"},
		"private without token": {args: []string{"--uri=hf://acme/tiny", "--dest=DEST"}, code: exitNotFound, msg: "does not exist, or is private and needs a token"},
		"wrong token":           {args: []string{"--uri=hf://acme/tiny", "--dest=DEST"}, token: "hf_wrong_token_value", code: exitAccessDenied, msg: "load failed (access denied)"},
		"missing revision":      {args: []string{"--uri=hf://acme/tiny@v9", "--dest=DEST"}, token: token, code: exitNotFound, msg: "v9"},
		"https digest mismatch": {args: []string{"--uri=" + web.URL + "/model.bin#sha256=" + strings.Repeat("0", 64), "--dest=DEST", "--ca-bundle=" + ca},
			code: exitVerification, msg: "load failed (verification failed)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("HF_ENDPOINT", h.URL())
			t.Setenv("HF_TOKEN", tc.token)
			dest := t.TempDir()
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = strings.ReplaceAll(a, "DEST", dest)
			}
			code, msg, logs := invokeLoad(t, args...)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Errorf("exit %d, message %q; want %d and %q\n%s", code, msg, tc.code, tc.msg, logs)
			}
			for _, secret := range []string{token, "hf_wrong_token_value"} {
				if strings.Contains(msg+logs, secret) {
					t.Errorf("a token is in the message or logs:\n%s\n%s", msg, logs)
				}
			}
		})
	}
}

func TestScrub(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"signed url":  {"GET https://bucket.s3.amazonaws.com/m.bin?X-Amz-Signature=abc&X-Amz-Credential=AKIA: 403", "GET https://bucket.s3.amazonaws.com/m.bin?<redacted> 403"},
		"bearer":      {`sent "Authorization: Bearer hf_abcdef"`, `sent "Authorization: Bearer <redacted>"`},
		"token param": {"token=s3cr3t rejected", "token=<redacted> rejected"},
		"plain":       {"hf repository acme/x does not exist; put HF_TOKEN in the Secret", "hf repository acme/x does not exist; put HF_TOKEN in the Secret"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := scrub(tc.in); got != tc.want {
				t.Errorf("scrub(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
