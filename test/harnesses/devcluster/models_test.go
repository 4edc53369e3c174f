package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf"
	"github.com/modelgate/modelgate/loader/s3"
)

// sampleFile reads a file of config/samples into out.
func sampleFile(t *testing.T, name string, out any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestSamplesNameTheServedModel: the samples' models are the ones make run
// serves, pinned to the commit the Hub serves, and the samples' Secret
// holds the store's key.
func TestSamplesNameTheServedModel(t *testing.T) {
	rev := sampleRevision()
	hfURI := "hf://" + sampleHFRepo
	s3URI := "s3://" + sampleS3Bucket + "/" + strings.TrimSuffix(sampleS3Prefix, "/")

	var d appsv1.Deployment
	sampleFile(t, "deployment.yaml", &d)
	var v1, alpha, beta struct {
		Spec struct {
			ModelSource string `json:"modelSource"`
			Model       struct {
				URI      string `json:"uri"`
				Revision string `json:"revision"`
			} `json:"model"`
		} `json:"spec"`
	}
	sampleFile(t, "serving_v1_aiinference.yaml", &v1)
	sampleFile(t, "serving_v1alpha1_aiinference.yaml", &alpha)
	sampleFile(t, "serving_v1beta1_aiinference.yaml", &beta)
	var secret corev1.Secret
	sampleFile(t, "s3-credentials.yaml", &secret)

	got := map[string]string{
		"deployment.yaml":                   d.Spec.Template.Annotations[annotations.Model],
		"serving_v1_aiinference.yaml":       v1.Spec.Model.URI + "@" + v1.Spec.Model.Revision,
		"serving_v1alpha1_aiinference.yaml": alpha.Spec.ModelSource,
		"serving_v1beta1_aiinference.yaml":  beta.Spec.Model.URI,
		"s3-credentials.yaml":               secret.StringData["AWS_ACCESS_KEY_ID"],
	}
	want := map[string]string{
		"deployment.yaml":                   hfURI + "@" + rev,
		"serving_v1_aiinference.yaml":       hfURI + "@" + rev,
		"serving_v1alpha1_aiinference.yaml": hfURI + "@main", // the branch, which the sample policies warn about
		"serving_v1beta1_aiinference.yaml":  s3URI,
		"s3-credentials.yaml":               sampleS3KeyID,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the samples' models (-want +got):\n%s", diff)
	}
}

// TestModelSource: modelgate's loader, with the Configuration's
// environment, lists the model on the Hub at the pinned commit and in the
// bucket with the samples' keys, and the bucket refuses it without them.
func TestModelSource(t *testing.T) {
	m, err := startModelSource("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	env := map[string]string{}
	for _, v := range m.loaderEnv() {
		env[v.Name] = v.Value
	}
	getenv := func(k string) string { return env[k] }
	var wantPaths []string
	for _, f := range sampleModelFiles() {
		wantPaths = append(wantPaths, f.Path)
	}
	slices.Sort(wantPaths)
	sorted := func(files []string) []string {
		slices.Sort(files)
		return files
	}
	ctx := context.Background()

	hub, err := hf.New(hf.Config{Repo: sampleHFRepo, Revision: sampleRevision(), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	l, err := hub.List(ctx)
	if err != nil {
		t.Fatalf("listing the Hub: %v", err)
	}
	var got []string
	var size int64
	for _, f := range l.Files {
		got = append(got, f.Path)
		size += f.Size
	}
	if diff := cmp.Diff(wantPaths, sorted(got)); diff != "" {
		t.Errorf("the Hub's files (-want +got):\n%s", diff)
	}
	if size != sampleModelSize() || size < 32<<20 {
		t.Errorf("the Hub's files are %d bytes, want %d (enough for progress lines)", size, sampleModelSize())
	}

	var secret corev1.Secret
	sampleFile(t, "s3-credentials.yaml", &secret)
	bucket := func(keys map[string]string) (*s3.Source, error) {
		return s3.New(ctx, s3.Config{Bucket: sampleS3Bucket, Prefix: strings.TrimSuffix(sampleS3Prefix, "/"), Getenv: func(k string) string {
			if v, ok := keys[k]; ok {
				return v
			}
			return env[k]
		}})
	}
	store, err := bucket(secret.StringData)
	if err != nil {
		t.Fatal(err)
	}
	l, err = store.List(ctx)
	if err != nil {
		t.Fatalf("listing the bucket with the samples' keys: %v", err)
	}
	got = nil
	for _, f := range l.Files {
		got = append(got, f.Path)
	}
	if diff := cmp.Diff(wantPaths, sorted(got)); diff != "" {
		t.Errorf("the bucket's files (-want +got):\n%s", diff)
	}
	anonymous, err := bucket(map[string]string{"AWS_NO_SIGN_REQUEST": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anonymous.List(ctx); err == nil {
		t.Error("the bucket lists the model for an unsigned request")
	}
}
