package webhook

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/webhook/decode"
)

// rawReview is the review as its request's bytes give it, for the
// decision cache to answer a repeat before the object is decoded
// (policies.Engine.Recall); nil when the review must be decoded to be
// judged: a set that may read the raw objects, an operation, kind or
// namespace the plain path skips or answers without the policies, a Pod
// UPDATE (judged only when it changes what the policies read of the old
// Pod, which the key does not hold), or an object AppendViewKey does not
// key. Release it with putKeyBuffer.
//
// Its content is what the view is built from besides the kind, the
// namespace and its labels (which policies.RawReview holds): this
// handler's salt (its configuration: the GPU keys, the profiles, the seal
// key), the operation, the API version, the requester when a policy reads
// it, and the object's fields the view decoders read.
func (h *Validating) rawReview(ctx context.Context, req admission.Request, set *policies.Set, allAnnotations bool) *policies.RawReview {
	switch {
	case !h.checker.Engine.Caches(), set.NeedsObjects(),
		req.Operation != admissionv1.Create && req.Operation != admissionv1.Update,
		req.Operation == admissionv1.Update && req.Kind.Kind == "Pod",
		h.excluded.Has(req.Namespace):
		return nil
	}
	if _, ok := decode.Views[req.Kind]; !ok {
		return nil
	}
	labels, err := h.namespaces.NamespaceLabels(ctx, req.Namespace)
	if err != nil || ignoredNamespace(labels) {
		return nil
	}
	r := keyPool.Get().(*policies.RawReview)
	buf := append(r.Content[:0], h.salt[:]...)
	add := func(s string) {
		buf = appendUvarint(buf, len(s))
		buf = append(buf, s...)
	}
	add(string(req.Operation))
	add(req.Kind.Group)
	add(req.Kind.Version)
	if set.ReadsWorkloadKey("userInfo") {
		u := &req.UserInfo
		add(u.Username)
		add(u.UID)
		buf = appendUvarint(buf, len(u.Groups))
		for _, g := range u.Groups {
			add(g)
		}
	}
	buf, name, ok := decode.AppendViewKey(req.Kind, req.Object.Raw, allAnnotations, buf)
	r.Content = buf
	if !ok {
		putKeyBuffer(r)
		return nil
	}
	r.Kind, r.Namespace, r.NamespaceLabels, r.Name = req.Kind.Kind, req.Namespace, labels, name
	return r
}

var keyPool = sync.Pool{New: func() any { return &policies.RawReview{Content: make([]byte, 0, 2048)} }}

// putKeyBuffer returns r to the pool, holding nothing of the request.
func putKeyBuffer(r *policies.RawReview) {
	if cap(r.Content) > 64<<10 {
		return // a large object's key is not kept for the next review
	}
	*r = policies.RawReview{Content: r.Content[:0]}
	keyPool.Put(r)
}

func appendUvarint(buf []byte, n int) []byte {
	return binary.AppendUvarint(buf, uint64(n)) //nolint:gosec // n is always a len(), never negative
}

// newKeySalt is a handler's own salt: decisions another handler (another
// configuration) made are never found under its keys.
func newKeySalt() (s [16]byte) {
	_, _ = rand.Read(s[:]) // crypto/rand.Read never fails (Go 1.24)
	return s
}
