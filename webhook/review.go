package webhook

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// admitted is a workload admission request a handler acts on: the object
// decoded once (and the old object, when the handler asks for it on an
// UPDATE), and the labels of its namespace.
type admitted struct {
	op       mutators.Operation
	obj, old *decode.Object
	nsLabels map[string]string
}

// admit does what every workload handler does first: it skips operations,
// kinds and namespaces modelgate leaves alone, decodes the object (and, with
// withOld, the old object on UPDATE), and reads the namespace's labels from
// the cache. decodeObj decodes a kind decode.Whole lists: the whole object for the
// mutating webhook (decodeWhole), what the policies read for the
// validating one. When the handler has nothing more to do, admit returns
// nil with the answer and its outcome.
func admit(ctx context.Context, req admission.Request, excluded sets.Set[string], ns NamespaceLabeler, withOld bool, decodeObj decodeFunc) (a *admitted, resp admission.Response, outcome string) {
	a = &admitted{op: mutators.Operation(req.Operation)}
	if a.op != mutators.Create && a.op != mutators.Update {
		return nil, admission.Allowed("operation not handled by modelgate"), outcomeSkipped
	}
	if _, ok := decode.Whole[req.Kind]; !ok {
		return nil, admission.Allowed("kind not handled by modelgate"), outcomeSkipped
	}
	if excluded.Has(req.Namespace) {
		return nil, admission.Allowed("namespace excluded"), outcomeSkipped
	}
	var err error
	if a.obj, err = decodeObj(req.Kind, req.Object.Raw); err != nil {
		return nil, admission.Errored(http.StatusBadRequest, err), outcomeBadRequest
	}
	if withOld && a.op == mutators.Update {
		if a.old, err = decodeObj(req.Kind, req.OldObject.Raw); err != nil {
			return nil, admission.Errored(http.StatusBadRequest, fmt.Errorf("old object: %w", err)), outcomeBadRequest
		}
	}
	if a.nsLabels, resp, outcome = admittedNamespace(ctx, req, ns); a.nsLabels == nil {
		return nil, resp, outcome
	}
	return a, admission.Response{}, ""
}

// admittedNamespace reads the labels of the request's namespace from the
// cache. When modelgate leaves the namespace alone (modelgate.io/ignore),
// or its labels cannot be read, it returns nil with the answer and its
// outcome.
func admittedNamespace(ctx context.Context, req admission.Request, ns NamespaceLabeler) (map[string]string, admission.Response, string) {
	labels, err := ns.NamespaceLabels(ctx, req.Namespace)
	if err != nil {
		return nil, admission.Errored(http.StatusInternalServerError, err), outcomeError
	}
	if ignoredNamespace(labels) {
		return nil, admission.Allowed("namespace ignored by modelgate"), outcomeSkipped
	}
	if labels == nil {
		labels = map[string]string{}
	}
	return labels, admission.Response{}, ""
}

// decodeFunc decodes an object of a kind decode.Whole lists.
type decodeFunc func(gvk metav1.GroupVersionKind, raw []byte) (*decode.Object, error)

// decodeWhole decodes the whole typed object.
func decodeWhole(gvk metav1.GroupVersionKind, raw []byte) (*decode.Object, error) {
	return decode.Whole[gvk](raw)
}

// excludedNamespaces are the namespaces modelgate never injects or judges:
// the Configuration's injection.excludedNamespaces and its own.
func excludedNamespaces(cfg *config.Configuration) sets.Set[string] {
	return sets.New(cfg.Injection.ExcludedNamespaces...).Insert(cfg.Namespace)
}

// ignoredNamespace reports a namespace labelled modelgate.io/ignore.
func ignoredNamespace(labels map[string]string) bool {
	_, ok := labels[annotations.NamespaceIgnore]
	return ok
}
