package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	gomodulespatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook/decode"
)

// Identities and namespaces the webhook tests use.
const (
	alice      = "alice@example.com"
	aliceLabel = "alice_example.com"
	bob        = "bob"
	rsCtrl     = "system:serviceaccount:kube-system:replicaset-controller"

	nsPlain   = "team-a"       // a team, no injection label
	nsEnabled = "team-enabled" // modelgate.io/injection=enabled
	nsIgnored = "team-ignored" // modelgate.io/ignore
	nsBroken  = "team-broken"  // the labeler fails
	teamName  = "ml-platform"
)

// fakeNamespaces is a NamespaceLabeler over a map of namespace labels; a
// namespace missing from the map is an error, as a cache miss would be.
type fakeNamespaces map[string]map[string]string

var errNoNamespace = errors.New("namespace not found")

func (f fakeNamespaces) NamespaceLabels(_ context.Context, name string) (map[string]string, error) {
	labels, ok := f[name]
	if !ok {
		return nil, errNoNamespace
	}
	return labels, nil
}

var testNamespaces = fakeNamespaces{
	nsPlain:       {annotations.NamespaceTeam: teamName},
	nsEnabled:     {annotations.NamespaceTeam: teamName, annotations.NamespaceInjection: annotations.InjectionEnabled},
	nsIgnored:     {annotations.NamespaceIgnore: "", annotations.NamespaceInjection: annotations.InjectionEnabled},
	"kube-system": {},
}

// newHandler is the handler under test: default configuration, the test
// namespaces, unregistered metrics.
func newHandler() *Mutating {
	return NewMutating(config.New(), testNamespaces, NewMetrics(nil))
}

// gvks are the group/version/kind of each builders kind.
var gvks = map[string]metav1.GroupVersionKind{
	"Pod":         {Group: "", Version: "v1", Kind: "Pod"},
	"Deployment":  {Group: "apps", Version: "v1", Kind: "Deployment"},
	"StatefulSet": {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	"Job":         {Group: "batch", Version: "v1", Kind: "Job"},
	"CronJob":     {Group: "batch", Version: "v1", Kind: "CronJob"},
}

// object builds a named object of the kind in the namespace, with its
// TypeMeta set as the API server sends it.
func object(kind, ns string, o builders.Options) client.Object {
	o.Namespace, o.Name = ns, "server"
	obj := builders.New(kind, o)
	g := gvks[kind]
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind})
	return obj
}

// toJSON marshals v, failing the test on error.
func toJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// request is an admission request for raw object bytes.
func request(kind string, op admissionv1.Operation, ns string, raw, oldRaw []byte, user string, groups ...string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("0df28fbd-5f5f-4a9e-9c8a-7b6a6b1c1c1c"),
		Kind:      gvks[kind],
		Resource:  metav1.GroupVersionResource{Group: gvks[kind].Group, Version: "v1", Resource: strings.ToLower(kind) + "s"},
		Namespace: ns,
		Name:      "server",
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: groups},
		Object:    runtime.RawExtension{Raw: raw},
		OldObject: runtime.RawExtension{Raw: oldRaw},
	}}
}

// create is a CREATE request for obj.
func create(t testing.TB, obj client.Object, user string, groups ...string) admission.Request {
	t.Helper()
	return request(obj.GetObjectKind().GroupVersionKind().Kind, admissionv1.Create, obj.GetNamespace(),
		toJSON(t, obj), nil, user, groups...)
}

// update is an UPDATE request from old to obj.
func update(t testing.TB, old, obj client.Object, user string) admission.Request {
	t.Helper()
	return request(obj.GetObjectKind().GroupVersionKind().Kind, admissionv1.Update, obj.GetNamespace(),
		toJSON(t, obj), toJSON(t, old), user)
}

// applyPatch applies the response's JSON patch to raw, as the API server
// does.
func applyPatch(t testing.TB, raw []byte, resp admission.Response) []byte {
	t.Helper()
	if len(patchesOf(resp)) == 0 {
		return raw
	}
	patch, err := jsonpatch.DecodePatch(toJSON(t, patchesOf(resp)))
	if err != nil {
		t.Fatalf("decoding patch: %v", err)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("applying patch %s: %v", toJSON(t, patchesOf(resp)), err)
	}
	return out
}

// decodeAs decodes raw into a fresh object of the kind.
func decodeAs(t testing.TB, kind string, raw []byte) client.Object {
	t.Helper()
	obj := builders.Empty(kind)
	if err := json.Unmarshal(raw, obj); err != nil {
		t.Fatalf("decoding %s: %v", kind, err)
	}
	return obj
}

// metasOf returns the object's own metadata and every template's, the way
// the decoders line them up.
func metasOf(t testing.TB, kind string, raw []byte) []*metav1.ObjectMeta {
	t.Helper()
	d, err := decode.Whole[gvks[kind]](raw)
	if err != nil {
		t.Fatalf("decoding %s: %v", kind, err)
	}
	return d.Target.Metas()
}

// patchPaths lists the paths the response's patch touches.
func patchPaths(resp admission.Response) []string {
	out := make([]string, len(patchesOf(resp)))
	for i, p := range patchesOf(resp) {
		out[i] = p.Path
	}
	return out
}

// patchesOf returns the operations of the response's JSON patch, decoded
// from the encoded patch the handler sends.
func patchesOf(resp admission.Response) []gomodulespatch.Operation {
	if len(resp.Patch) == 0 {
		return nil
	}
	var ops []gomodulespatch.Operation
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		panic(fmt.Sprintf("the handler sent a patch that is not JSON: %v: %s", err, resp.Patch))
	}
	return ops
}
