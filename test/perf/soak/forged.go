package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/webhook"
)

// forgedOwns is the record a user writes by hand to make modelgate take
// their own fields as its parts.
const forgedOwns = `{"mutators":["owner-metadata","model-loader","gpu-placement","serving-probes"],"settings":"0",` +
	`"owns":["limits/server/memory=1Gi","requests/server/cpu=500m","nodeAffinity/In/tenant.example.com/pool"]}`

// forgedPod is an opted-in GPU Pod that sets a memory limit, a CPU request
// and a node requirement of its own, and carries a forged record that
// claims all three.
func forgedPod(name string) *corev1.Pod {
	p := notebookPod(name)
	p.Annotations[annotations.Injected] = forgedOwns
	c := &p.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
	}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tenant.example.com/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
		}}},
	}}
	return p
}

// keptUserFields lists which of the forged record's three fields p lacks.
func keptUserFields(p *corev1.Pod) []string {
	var missing []string
	i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "server" })
	if i < 0 {
		return []string{"container server"}
	}
	c := p.Spec.Containers[i]
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.Cmp(resource.MustParse("1Gi")) != 0 {
		missing = append(missing, "limits/server/memory=1Gi")
	}
	if q, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok || q.Cmp(resource.MustParse("500m")) != 0 {
		missing = append(missing, "requests/server/cpu=500m")
	}
	found := false
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			found = found || slices.ContainsFunc(t.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
				return r.Key == "tenant.example.com/pool" && r.Operator == corev1.NodeSelectorOpIn && slices.Equal(r.Values, []string{"a"})
			})
		}
	}
	if !found {
		missing = append(missing, "nodeAffinity/In/tenant.example.com/pool")
	}
	return missing
}

// forgedRecord admits forgedPod twice: straight to the replica (the patch
// applied as the API server would) and created through the API server
// (read back). Each result says what was lost, if anything.
func (a *attacker) forgedRecord(ctx context.Context, dev client.Client) ([]string, error) {
	var out []string
	p := forgedPod("forged-direct")
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the forged Pod: %w", err)
	}
	body, err := admissionReview("forged", metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", admissionv1.Create, raw, nil)
	if err != nil {
		return nil, err
	}
	code, answer, err := post(ctx, a.client, a.base+webhook.MutatePath, body)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("reviewing the forged Pod: %d %w", code, err)
	}
	r, err := admissionAnswer(answer, "forged")
	if err != nil {
		return nil, err
	}
	switch {
	case !r.Allowed:
		out = append(out, fmt.Sprintf("direct review: denied: %s", r.Result.Message))
	default:
		patched := raw
		if len(r.Patch) > 0 {
			patch, err := jsonpatch.DecodePatch(r.Patch)
			if err != nil {
				return nil, fmt.Errorf("decoding the forged Pod's patch: %w", err)
			}
			if patched, err = patch.Apply(raw); err != nil {
				return nil, fmt.Errorf("applying the forged Pod's patch: %w", err)
			}
		}
		var got corev1.Pod
		if err := json.Unmarshal(patched, &got); err != nil {
			return nil, fmt.Errorf("decoding the patched forged Pod: %w", err)
		}
		out = append(out, verdict("direct review", len(r.Patch) > 0, keptUserFields(&got), got.Annotations[annotations.Injected] != forgedOwns))
	}

	p = forgedPod("forged-apiserver")
	if err := dev.Create(ctx, p); err != nil {
		return append(out, fmt.Sprintf("through the API server: create failed: %v", err)), nil
	}
	var got corev1.Pod
	if err := dev.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
		return nil, fmt.Errorf("reading the forged Pod back: %w", err)
	}
	_ = dev.Delete(ctx, &got, client.GracePeriodSeconds(0))
	return append(out, verdict("through the API server", true, keptUserFields(&got), got.Annotations[annotations.Injected] != forgedOwns)), nil
}

// verdict words a forged-record result.
func verdict(how string, injected bool, missing []string, recordReplaced bool) string {
	if len(missing) > 0 {
		return fmt.Sprintf("%s: LOST %v", how, missing)
	}
	return fmt.Sprintf("%s: injected=%t, all three fields kept, forged record replaced=%t", how, injected, recordReplaced)
}
