package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/offline"
)

func TestModelgateAnnotations(t *testing.T) {
	// nested wraps a metadata map in depth levels of {"spec": ...}.
	nested := func(depth int) string {
		return strings.Repeat(`{"spec":`, depth) + `{"metadata":{"annotations":{"modelgate.io/gpu":"1"}}}` + strings.Repeat(`}`, depth)
	}
	cases := map[string]struct {
		obj  string
		want []annotationSite
	}{
		"none": {
			obj: `{"apiVersion":"ray.io/v1","kind":"RayService","metadata":{"name":"x","annotations":{"example.com/a":"b"}}}`,
		},
		"labels do not count": {
			obj: `{"metadata":{"labels":{"modelgate.io/team":"nlp"}},"spec":{"template":{"metadata":{"labels":{"modelgate.io/inject":"true"}}}}}`,
		},
		"own metadata, keys sorted, others left out": {
			obj:  `{"metadata":{"annotations":{"modelgate.io/model":"s3://b/m","example.com/a":"b","modelgate.io/inject":"true"}}}`,
			want: []annotationSite{{Path: "metadata.annotations", Keys: []string{"modelgate.io/inject", "modelgate.io/model"}}},
		},
		"pod templates in maps and lists, in field order": {
			obj: `{"spec":{"workers":[{"template":{"metadata":{"annotations":{"modelgate.io/gpu":"1"}}}},{"template":{}}],` +
				`"head":{"template":{"metadata":{"annotations":{"modelgate.io/inject":"true"}}}}},` +
				`"metadata":{"annotations":{"modelgate.io/inject":"true"}}}`,
			want: []annotationSite{
				{Path: "metadata.annotations", Keys: []string{"modelgate.io/inject"}},
				{Path: "spec.head.template.metadata.annotations", Keys: []string{"modelgate.io/inject"}},
				{Path: "spec.workers[0].template.metadata.annotations", Keys: []string{"modelgate.io/gpu"}},
			},
		},
		"an annotations map outside metadata does not count": {
			obj: `{"spec":{"predictor":{"annotations":{"modelgate.io/inject":"true"}}}}`,
		},
		"metadata that is not a map": {
			obj: `{"metadata":"x","spec":{"metadata":{"annotations":"y"}},"items":[{"metadata":null}]}`,
		},
		"at the depth bound": {
			obj:  nested(maxAnnotationDepth),
			want: []annotationSite{{Path: "spec" + strings.Repeat(".spec", maxAnnotationDepth-1) + ".metadata.annotations", Keys: []string{"modelgate.io/gpu"}}},
		},
		"below the depth bound": {
			obj: nested(maxAnnotationDepth + 1),
		},
		"not JSON": {
			obj: `{"metadata":`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := modelgateAnnotations([]byte(tc.obj))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("modelgateAnnotations mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteUnhandledAnnotations(t *testing.T) {
	ti := offline.TypeInfo{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob"}
	ti.Metadata.Name = "finetune"

	var none bytes.Buffer
	writeUnhandledAnnotations(&none, &ti, nil)
	if none.Len() != 0 {
		t.Errorf("no annotations printed %q, want nothing", none.String())
	}

	var got bytes.Buffer
	writeUnhandledAnnotations(&got, &ti, []annotationSite{
		{Path: "spec.pytorchReplicaSpecs.Worker.template.metadata.annotations", Keys: []string{"modelgate.io/gpu", "modelgate.io/inject"}},
	})
	want := `  warning: PyTorchJob "finetune" (kubeflow.org/v1) is not a kind modelgate injects: its modelgate.io/ annotations have no effect on it
    spec.pytorchReplicaSpecs.Worker.template.metadata.annotations: modelgate.io/gpu, modelgate.io/inject
    modelgate injects only Pods (v1), Deployments and StatefulSets (apps/v1), Jobs and CronJobs (batch/v1); pods created for it are injected only if they carry the annotations themselves or their namespace has modelgate.io/injection=enabled
`
	if diff := cmp.Diff(want, got.String()); diff != "" {
		t.Errorf("warning mismatch (-want +got):\n%s", diff)
	}
}
