package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"golang.org/x/time/rate"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// The samples' model, as `make run` serves it on loopback: a Hugging Face
// repository and an S3 prefix holding the same small generated model. The
// organization and the bucket are the ones the sample policies allow
// (config/samples/policies/model-source-allowlist.yaml), so applying the
// policies denies the samples for what they demonstrate, not for their
// model's source.
const (
	sampleHFRepo   = "acme-ai/tiny-model"
	sampleS3Bucket = "acme-ml-models"
	sampleS3Prefix = "tiny-model/"
	// sampleS3Region is the region the loader signs for.
	sampleS3Region = "us-east-1"
	// The sample store's keys: what config/samples/s3-credentials.yaml
	// holds. The store refuses requests not signed with sampleS3KeyID.
	sampleS3KeyID = "AKIDMODELGATESAMPLES"
	// sampleWeightsSize is the weights' size: with modelRate, a few
	// seconds of progress lines in the loader's log.
	sampleWeightsSize = 60 << 20
	// modelRate limits what each store sends, all requests together, so
	// that a load takes a few seconds and shows its progress.
	modelRate = 8 << 20
)

// sampleModelFiles are the model's files: a Llama-shaped config, a
// tokenizer and one safetensors file of generated weights.
func sampleModelFiles() []hubtest.File {
	return []hubtest.File{
		{Path: "config.json", Content: loadertest.Bytes([]byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "vocab_size": 512}` + "\n"))},
		{Path: "generation_config.json", Content: loadertest.Bytes([]byte(`{"max_new_tokens": 64}` + "\n"))},
		{Path: "tokenizer.json", Content: loadertest.Bytes([]byte(`{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}}` + "\n"))},
		{Path: "tokenizer_config.json", Content: loadertest.Bytes([]byte(`{"model_max_length": 2048}` + "\n"))},
		{Path: "model.safetensors", Content: loadertest.Safetensors(28, sampleWeightsSize), LFS: true},
	}
}

// sampleModelSize is the model's size in bytes.
func sampleModelSize() int64 {
	var n int64
	for _, f := range sampleModelFiles() {
		n += f.Content.Size()
	}
	return n
}

// sampleRevision is the commit the Hub serves the model at: pinned in
// config/samples (a test holds them equal).
func sampleRevision() string { return hubtest.OneCommit(sampleModelFiles()...).Refs["main"] }

// modelSource is the Hub and the S3 store, on loopback or, with the real
// node, on its Pods' gateway.
type modelSource struct {
	hub *hubtest.Server
	s3  *httptest.Server
}

// startModelSource starts the Hub and the S3 store with the model, on
// host (an address of this machine).
func startModelSource(host string) (*modelSource, error) {
	hub := hubtest.New(hubtest.WithHost(host))
	hub.AddRepo(sampleHFRepo, hubtest.OneCommit(sampleModelFiles()...))
	hub.SetRate(modelRate)
	backend := s3mem.New()
	if err := backend.CreateBucket(sampleS3Bucket); err != nil {
		hub.Close()
		return nil, fmt.Errorf("creating the sample bucket: %w", err)
	}
	for _, f := range sampleModelFiles() {
		meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
		if _, err := backend.PutObject(sampleS3Bucket, sampleS3Prefix+f.Path, meta, f.Content.Reader(), f.Content.Size(), nil); err != nil {
			hub.Close()
			return nil, fmt.Errorf("storing %s in the sample bucket: %w", f.Path, err)
		}
	}
	srv := httptest.NewUnstartedServer(signedOnly(throttled(gofakes3.New(backend).Server(), modelRate)))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		hub.Close()
		return nil, fmt.Errorf("listening on %s: %w", host, err)
	}
	_ = srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	return &modelSource{hub: hub, s3: srv}, nil
}

// loaderEnv is the Configuration's loader environment that sends the
// loaders to the stores: endpoints and region only; the S3 keys are the
// samples' Secret's.
func (m *modelSource) loaderEnv() []config.EnvVar {
	return []config.EnvVar{
		{Name: "HF_ENDPOINT", Value: m.hub.URL()},
		{Name: "AWS_ENDPOINT_URL_S3", Value: m.s3.URL},
		{Name: "AWS_REGION", Value: sampleS3Region},
	}
}

// Close stops both stores.
func (m *modelSource) Close() {
	m.hub.Close()
	m.s3.Close()
}

// signedOnly refuses, as S3 does, requests not signed with the samples'
// key (SigV4: "AWS4-HMAC-SHA256 Credential=<key id>/<date>/..."), so that
// a loader without the samples' Secret fails as it would on a real store.
// The signature itself is not checked.
func signedOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+sampleS3KeyID+"/") {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// throttled limits the bytes next writes, all requests together, to
// bytesPerSecond.
func throttled(next http.Handler, bytesPerSecond int) http.Handler {
	lim := rate.NewLimiter(rate.Limit(bytesPerSecond), throttleChunk)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&throttledWriter{ResponseWriter: w, ctx: r.Context(), lim: lim}, r)
	})
}

// throttleChunk is the most throttledWriter writes at once.
const throttleChunk = 64 << 10

type throttledWriter struct {
	http.ResponseWriter
	ctx context.Context
	lim *rate.Limiter
}

func (t *throttledWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		chunk := p[:min(len(p), throttleChunk)]
		if err := t.lim.WaitN(t.ctx, len(chunk)); err != nil {
			return n, err
		}
		w, err := t.ResponseWriter.Write(chunk)
		n += w
		if err != nil {
			return n, err
		}
		p = p[len(chunk):]
	}
	return n, nil
}
