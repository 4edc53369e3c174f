package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stubReader answers Gets of namespace metadata: notFound times NotFound,
// then err if set, else the labels.
type stubReader struct {
	client.Reader
	notFound int
	err      error
	labels   map[string]string
	calls    int
}

func (s *stubReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.calls++
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
		return errors.New("stubReader: want a PartialObjectMetadata")
	}
	if s.calls <= s.notFound {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
	}
	if s.err != nil {
		return s.err
	}
	obj.SetLabels(s.labels)
	return nil
}

func TestCachedNamespaces(t *testing.T) {
	errCache := errors.New("cache is not started")
	labels := map[string]string{"modelgate.io/team": teamName}
	cases := map[string]struct {
		reader    *stubReader
		wait      time.Duration
		want      map[string]string
		wantErr   error
		wantCalls int
	}{
		"cached":                      {reader: &stubReader{labels: labels}, wait: time.Second, want: labels, wantCalls: 1},
		"cached without labels":       {reader: &stubReader{}, wait: time.Second, want: nil, wantCalls: 1},
		"reaches the cache in time":   {reader: &stubReader{notFound: 2, labels: labels}, wait: time.Minute, want: labels, wantCalls: 3},
		"never cached, no wait":       {reader: &stubReader{notFound: 1 << 30}, wait: 0, wantErr: errNamespaceNotCached, wantCalls: 1},
		"never cached within a wait":  {reader: &stubReader{notFound: 1 << 30}, wait: 20 * time.Millisecond, wantErr: errNamespaceNotCached},
		"cache error is not retried":  {reader: &stubReader{err: errCache}, wait: time.Minute, wantErr: errCache, wantCalls: 1},
		"cache error after not found": {reader: &stubReader{notFound: 1, err: errCache}, wait: time.Minute, wantErr: errCache, wantCalls: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &cachedNamespaces{reader: tc.reader, wait: tc.wait, poll: time.Millisecond}
			got, err := c.NamespaceLabels(context.Background(), nsPlain)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if tc.wantCalls > 0 && tc.reader.calls != tc.wantCalls {
				t.Errorf("reader called %d times, want %d", tc.reader.calls, tc.wantCalls)
			}
		})
	}
}

func TestCachedNamespacesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := &cachedNamespaces{reader: &stubReader{notFound: 1 << 30}, wait: time.Hour, poll: time.Hour}
	if _, err := c.NamespaceLabels(ctx, nsPlain); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want one wrapping context.Canceled", err)
	}
}
