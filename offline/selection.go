package offline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/modelgate/modelgate/api/annotations"
)

// PolicyScopeLabel set to PolicyScopeAll on a namespace sends every
// workload in it to the policies (scope.validate.modelgate.io).
const (
	PolicyScopeLabel = annotations.Prefix + "policy-scope"
	PolicyScopeAll   = "all"
)

// SentToPolicies reports whether the API server sends an object (after
// mutation) to one of the validating webhooks, and if not, why. It mirrors
// the match conditions of config/webhook/validating-selectors.yaml, which
// the API server evaluates and the handler never sees:
//
//   - a namespace labelled modelgate.io/policy-scope=all sends everything;
//   - a namespace labelled modelgate.io/injection=enabled sends every
//     workload not opted out with modelgate.io/inject: "false";
//   - any other namespace sends workloads whose modelgate.io/inject is set
//     to anything but "false";
//   - and all of them send workloads with a container or init container
//     that requests or limits the GPU resource, and every ResourceClaim and
//     ResourceClaimTemplate (resource.k8s.io/v1).
//
// The namespace exclusions of the selectors (kube-system, modelgate's
// namespace, modelgate.io/ignore) are left to the handler, which applies
// the same ones.
func SentToPolicies(obj []byte, nsLabels map[string]string, gpuResource string) (bool, string, error) {
	if nsLabels[PolicyScopeLabel] == PolicyScopeAll {
		return true, "", nil
	}
	var o map[string]any
	d := json.NewDecoder(bytes.NewReader(obj))
	d.UseNumber()
	if err := d.Decode(&o); err != nil {
		return false, "", fmt.Errorf("reading the object: %w", err)
	}
	ok, why := SentToPoliciesDecoded(o, nsLabels, gpuResource)
	return ok, why, nil
}

// SentToPoliciesDecoded is SentToPolicies for an object already decoded.
func SentToPoliciesDecoded(o map[string]any, nsLabels map[string]string, gpuResource string) (bool, string) {
	if nsLabels[PolicyScopeLabel] == PolicyScopeAll {
		return true, ""
	}
	if requestsGPUs(o, gpuResource) || isClaim(o) {
		return true, ""
	}
	if nsLabels[annotations.NamespaceInjection] == annotations.InjectionEnabled {
		if injectValue(o, func(v string) bool { return v == "false" }) {
			return false, `not sent to the policies: opted out with modelgate.io/inject: "false" and requests no GPUs`
		}
		return true, ""
	}
	if injectValue(o, func(v string) bool { return v != "false" }) {
		return true, ""
	}
	return false, "not sent to the policies: not opted in and requests no GPUs"
}

// metaPaths and specPaths are where the match conditions look for
// metadata and pod specs.
var (
	metaPaths = [][]string{
		{"metadata"},
		{"spec", "template", "metadata"},
		{"spec", "jobTemplate", "metadata"},
		{"spec", "jobTemplate", "spec", "template", "metadata"},
	}
	specPaths = [][]string{
		{"spec"},
		{"spec", "template", "spec"},
		{"spec", "jobTemplate", "spec", "template", "spec"},
	}
)

// Metadata yields each metadata object of a decoded object: its own and its
// pod templates' (a Deployment's, a CronJob's job template's and that
// template's pod template), where present.
func Metadata(o map[string]any) iter.Seq[map[string]any] {
	return func(yield func(map[string]any) bool) {
		for _, p := range metaPaths {
			if m, ok := lookup(o, p...).(map[string]any); ok && !yield(m) {
				return
			}
		}
	}
}

// injectValue reports whether any metadata carries modelgate.io/inject
// with a value that satisfies match.
func injectValue(o map[string]any, match func(string) bool) bool {
	for m := range Metadata(o) {
		ann, _ := m["annotations"].(map[string]any)
		if v, ok := ann[annotations.Inject].(string); ok && match(v) {
			return true
		}
	}
	return false
}

// requestsGPUs reports whether any container or init container of any pod
// spec requests or limits the resource.
func requestsGPUs(o map[string]any, resource string) bool {
	for _, p := range specPaths {
		spec, _ := lookup(o, p...).(map[string]any)
		if claims, _ := spec["resourceClaims"].([]any); len(claims) > 0 {
			return true
		}
		for _, list := range []string{"containers", "initContainers"} {
			cs, _ := spec[list].([]any)
			for _, c := range cs {
				if claims, _ := lookup(c, "resources", "claims").([]any); len(claims) > 0 {
					return true
				}
				for _, section := range []string{"limits", "requests"} {
					rl, _ := lookup(c, "resources", section).(map[string]any)
					for name := range rl {
						if name == resource || strings.HasSuffix(name, "/gpu") || strings.HasPrefix(name, "nvidia.com/mig-") {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// isClaim reports a ResourceClaim or ResourceClaimTemplate: each is sent
// to the policies, which judge it by what it asks for.
func isClaim(o map[string]any) bool {
	if v, _ := o["apiVersion"].(string); v != claimAPIVersion {
		return false
	}
	k, _ := o["kind"].(string)
	return k == "ResourceClaim" || k == "ResourceClaimTemplate"
}

// lookup walks nested objects; nil when a step is missing.
func lookup(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// RequestsGPUs reports whether any pod spec of the object (decoded JSON)
// requests or limits GPUs: the resource, any */gpu or MIG resource, or a
// DRA claim, as the webhooks' match conditions see it.
func RequestsGPUs(obj map[string]any, resource string) bool { return requestsGPUs(obj, resource) }

// OptedOut reports whether any metadata of the object (decoded JSON)
// carries modelgate.io/inject: "false".
func OptedOut(obj map[string]any) bool {
	return injectValue(obj, func(v string) bool { return v == "false" })
}
