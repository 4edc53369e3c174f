// Package migrate rewrites every stored object of a custom resource in the
// CRD's storage version, and then, when asked, drops the older versions
// from the CRD's status.storedVersions so that they can be removed from
// the CRD safely. It is what `modelgate migrate` runs for AIInference.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// crdResource is the CustomResourceDefinition resource.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// pageSize is how many objects one list call returns.
const pageSize = 250

// Options say what to migrate.
type Options struct {
	// CRD is the CustomResourceDefinition's name, e.g.
	// aiinferences.serving.modelgate.io.
	CRD string
	// PruneStoredVersions sets the CRD's status.storedVersions to the
	// storage version alone once every object was rewritten.
	PruneStoredVersions bool
	// Log receives one line per object that failed, and progress; nil
	// discards it.
	Log io.Writer
}

// Report is what a run did.
type Report struct {
	// StorageVersion is the version every object was rewritten in.
	StorageVersion string
	// Total objects listed, Migrated rewritten, Gone deleted meanwhile,
	// Failed not rewritten (see Failures).
	Total, Migrated, Gone, Failed int
	Failures                      []error
	// StoredVersionsBefore and StoredVersionsAfter are the CRD's
	// status.storedVersions before and after the run.
	StoredVersionsBefore, StoredVersionsAfter []string
}

// ErrIncomplete is returned (wrapped) when some objects were not rewritten;
// status.storedVersions is then left as it was.
var ErrIncomplete = errors.New("some objects were not rewritten")

// Run rewrites every object of the CRD through the API server: an empty
// merge patch makes the API server read the object, convert it to the
// storage version and store it again when its stored form differs. Objects
// deleted meanwhile are counted as gone, not as failures.
func Run(ctx context.Context, dyn dynamic.Interface, o Options) (Report, error) {
	var r Report
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	crd, err := dyn.Resource(crdResource).Get(ctx, o.CRD, metav1.GetOptions{})
	if err != nil {
		return r, fmt.Errorf("reading CustomResourceDefinition %s: %w", o.CRD, err)
	}
	gvr, storage, err := storageResource(crd)
	if err != nil {
		return r, err
	}
	r.StorageVersion = storage
	r.StoredVersionsBefore, _, _ = unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	r.StoredVersionsAfter = r.StoredVersionsBefore

	opts := metav1.ListOptions{Limit: pageSize}
	for {
		list, err := dyn.Resource(gvr).List(ctx, opts)
		if err != nil {
			return r, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			r.Total++
			_, err := dyn.Resource(gvr).Namespace(item.GetNamespace()).Patch(ctx, item.GetName(), types.MergePatchType, []byte("{}"), metav1.PatchOptions{})
			switch {
			case err == nil:
				r.Migrated++
			case apierrors.IsNotFound(err):
				r.Gone++
			default:
				r.Failed++
				err = fmt.Errorf("%s/%s: %w", item.GetNamespace(), item.GetName(), err)
				r.Failures = append(r.Failures, err)
				fmt.Fprintf(log, "failed: %v\n", err)
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	if r.Failed > 0 {
		return r, fmt.Errorf("%w: %d of %d failed; status.storedVersions left as %v", ErrIncomplete, r.Failed, r.Total, r.StoredVersionsBefore)
	}
	if !o.PruneStoredVersions || slices.Equal(r.StoredVersionsBefore, []string{storage}) {
		return r, nil
	}
	if err := unstructured.SetNestedStringSlice(crd.Object, []string{storage}, "status", "storedVersions"); err != nil {
		return r, fmt.Errorf("setting status.storedVersions: %w", err)
	}
	updated, err := dyn.Resource(crdResource).UpdateStatus(ctx, crd, metav1.UpdateOptions{})
	if err != nil {
		return r, fmt.Errorf("updating status.storedVersions of %s: %w", o.CRD, err)
	}
	r.StoredVersionsAfter, _, _ = unstructured.NestedStringSlice(updated.Object, "status", "storedVersions")
	return r, nil
}

// storageResource returns the resource of the CRD's storage version.
func storageResource(crd *unstructured.Unstructured) (schema.GroupVersionResource, string, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if stored, _ := m["storage"].(bool); stored {
			name, _ := m["name"].(string)
			return schema.GroupVersionResource{Group: group, Version: name, Resource: plural}, name, nil
		}
	}
	return schema.GroupVersionResource{}, "", fmt.Errorf("CustomResourceDefinition %s has no storage version", crd.GetName())
}

// String summarizes the report in one line.
func (r Report) String() string {
	return fmt.Sprintf("%d of %d rewritten in %s (%d gone, %d failed); storedVersions %v -> %v",
		r.Migrated, r.Total, r.StorageVersion, r.Gone, r.Failed, r.StoredVersionsBefore, r.StoredVersionsAfter)
}
