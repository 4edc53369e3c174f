package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// The model servers the loader specs fetch from run in the test process,
// on loopback: the loader reaches them as a Pod would reach a mirror or an
// S3-compatible store, through the endpoints in the user's Secret.

// tinyLLM is the Hub repository of the loader specs.
const tinyLLM = "acme/tiny-llm"

// tinyLLMFiles are its files: two regular ones and an LFS shard of a few
// MiB, served from the CDN.
func tinyLLMFiles() []hubtest.File {
	return []hubtest.File{
		{Path: "config.json", Content: loadertest.Bytes([]byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2}`))},
		{Path: "tokenizer.json", Content: loadertest.Bytes([]byte(`{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}`))},
		{Path: "model.safetensors", Content: loadertest.Safetensors(42, 3<<20+4321), LFS: true},
	}
}

// startHub starts a fake Hub holding tinyLLM as a private repository that
// token reads, and returns it with the commit of main.
func startHub(token string) (*hubtest.Server, string) {
	hub := newHub()
	repo := hubtest.OneCommit(tinyLLMFiles()...)
	repo.Private, repo.Tokens = true, []string{token}
	hub.AddRepo(tinyLLM, repo)
	return hub, repo.Refs["main"]
}

// s3Creds are the store's static credentials (fake, and never to appear
// in a message).
const (
	s3KeyID  = "AKIDMODELGATEE2E"
	s3Secret = "e2e-s3cr3t-never-printed"
	s3Bucket = "bucket"
)

// s3Store is gofakes3 behind a handler that checks the credentials (a
// request must be signed with s3KeyID), counts the object bytes it serves
// per key, and holds object reads until released.
type s3Store struct {
	srv     *httptest.Server
	backend *s3mem.Backend

	gate    chan struct{}
	release func()

	mu       sync.Mutex
	served   map[string]int64 // body bytes of object GETs, by key
	unsigned int              // requests refused for lack of our key id
}

func startS3() *s3Store {
	st := &s3Store{backend: s3mem.New(), gate: make(chan struct{}), served: map[string]int64{}}
	st.release = sync.OnceFunc(func() { close(st.gate) })
	DeferCleanup(st.release) // never leave a request hanging
	Expect(st.backend.CreateBucket(s3Bucket)).To(Succeed())
	fake := gofakes3.New(st.backend).Server()
	st.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// SigV4: "AWS4-HMAC-SHA256 Credential=<key id>/<date>/...".
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+s3KeyID+"/") {
			st.mu.Lock()
			st.unsigned++
			st.mu.Unlock()
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			return
		}
		key, isObject := strings.CutPrefix(r.URL.Path, "/"+s3Bucket+"/")
		if r.Method != http.MethodGet || !isObject || key == "" {
			fake.ServeHTTP(w, r)
			return
		}
		select {
		case <-st.gate:
		case <-r.Context().Done():
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		fake.ServeHTTP(cw, r)
		st.mu.Lock()
		st.served[key] += cw.n
		st.mu.Unlock()
	}))
	st.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	// Where the real node's Pods reach it.
	l, err := cluster.ListenForPods()
	Expect(err).NotTo(HaveOccurred())
	_ = st.srv.Listener.Close()
	st.srv.Listener = l
	st.srv.Start()
	DeferCleanup(st.srv.Close)
	return st
}

// put stores an object.
func (st *s3Store) put(key string, data []byte) {
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	_, err := st.backend.PutObject(s3Bucket, key, meta, bytes.NewReader(data), int64(len(data)), nil)
	Expect(err).NotTo(HaveOccurred())
}

// servedUnder sums the object bytes served under a key prefix ("dir/").
func (st *s3Store) servedUnder(prefix string) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var n int64
	for k, v := range st.served {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// refused is the number of requests refused for lack of the key id.
func (st *s3Store) refused() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.unsigned
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// credentials creates the Secret a user would name in
// modelgate.io/model-credentials.
func credentials(ctx context.Context, ns, name string, data map[string]string) {
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		StringData: data,
	})).To(Succeed())
}

// digestsUnder returns the SHA-256 of every file under dir, by slash path,
// following symbolic links as a reader in the container would, and
// skipping the directories named in skip.
func digestsUnder(dir string, skip ...string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	return out
}
