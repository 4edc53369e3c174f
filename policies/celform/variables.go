// Package celform turns a WorkloadPolicy's CEL form (spec.cel) into the
// ValidatingAdmissionPolicy and binding the API server enforces itself, and
// judges objects with them offline with the Kubernetes CEL libraries, the
// ones the API server uses: compiled in the same environment, evaluated by
// the same validator. modelgate's variables (Variables) give the CEL form
// the parts of the policy view (policies/workload) that CEL can compute
// from the object alone; TestVariablesAsTheView holds them to the view.
package celform

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// Keys are what modelgate's variables read of the Configuration: the GPU
// resource and the node label of the GPU product (injection.gpu).
type Keys struct {
	GPUResource  string
	ProductLabel string
}

// The names of modelgate's variables, in the order they are defined; a
// CEL form's own variables may not take them.
const (
	VarInScope        = "inScope"
	VarExcepted       = "excepted"
	VarGPUResource    = "gpuResource"
	VarPodMeta        = "podMeta"
	VarMetas          = "metas"
	VarPodSpec        = "podSpec"
	VarContainers     = "containers"
	VarInitContainers = "initContainers"
	VarContainerGPUs  = "containerGPUs"
	VarInitGPUs       = "initGPUs"
	VarSidecarGPUs    = "sidecarGPUs"
	VarInitPeaks      = "initPeaks"
	VarGPUs           = "gpus"
	VarProductTerms   = "productTerms"
	VarGPUProducts    = "gpuProducts"
	VarModel          = "model"
	VarModelScheme    = "modelScheme"
	VarModelHost      = "modelHost"
	VarModelBucket    = "modelBucket"
	VarOwner          = "owner"
	VarTeam           = "team"
	VarClaims         = "claims"
	VarParameters     = "parameters"
)

// migPrefix starts NVIDIA's MIG resources, each instance a GPU whatever
// the configured resource (policies/workload counts them the same way).
const migPrefix = "nvidia.com/mig-"

// Variables are modelgate's variables for keys and a policy's parameters,
// in order: each may read those before it. (Generate puts inScope, whether
// the webhooks' scope holds the object, before them.)
//
//   - gpuResource: the GPU resource (injection.gpu.resourceName).
//   - podMeta, podSpec: the Pod's metadata and spec, or the pod template's
//     of a Deployment, StatefulSet, Job or CronJob ({} for other kinds);
//     metas: every metadata of the object, innermost (the pod's) first.
//   - containers, initContainers: the pod's containers.
//   - containerGPUs, initGPUs: the GPUs each holds: its limit of the GPU
//     resource, else its request, plus its MIG instances.
//   - sidecarGPUs, initPeaks, gpus: the GPUs of the sidecars, the peak
//     while each init container runs, and the pod's effective GPU request,
//     as Kubernetes schedules it: app containers and sidecars run
//     together, a regular init container runs beside the sidecars started
//     before it.
//   - gpuProducts: modelgate.io/gpu-product's products, else those the
//     required node affinity admits on the product label (productTerms:
//     per node selector term), sorted; [] when unconstrained.
//   - model, modelScheme, modelHost, modelBucket: modelgate.io/model as
//     written (the pod template's, else the object's), its scheme, its
//     host (the registry of oci://, the host and port of https://) and its
//     bucket (s3://, gs://); "" when there is none.
//   - owner, team: the object's modelgate.io/owner and modelgate.io/team
//     labels as written. CEL cannot verify their seal, as modelgate does.
//   - claims: the pod's resource claims (dynamic resource allocation):
//     CEL cannot see what their templates ask for.
//   - parameters: spec.parameters.
func Variables(k Keys, parameters map[string]any) ([]admissionregistrationv1.Variable, error) {
	params, err := literal(parameters)
	if err != nil {
		return nil, fmt.Errorf("spec.parameters: %w", err)
	}
	res := quote(k.GPUResource)
	mig := quote(migPrefix)
	// gpusOf is one container's GPUs, c being the container.
	gpusOf := `(c.?resources.?limits[?` + res + `].hasValue() ? quantity(string(c.resources.limits[` + res + `])).asInteger() :
  c.?resources.?requests[?` + res + `].hasValue() ? quantity(string(c.resources.requests[` + res + `])).asInteger() : 0) +
 c.?resources.?limits.orValue({}).filter(k, k.startsWith(` + mig + `) && k != ` + res + `).map(k, quantity(string(c.resources.limits[k])).asInteger()).sum() +
 c.?resources.?requests.orValue({}).filter(k, k.startsWith(` + mig + `) && k != ` + res + ` && !(k in c.?resources.?limits.orValue({}))).map(k, quantity(string(c.resources.requests[k])).asInteger()).sum()`
	key := func(name string) string {
		q := quote(name)
		return `(variables.metas.exists(m, ` + q + ` in m.?annotations.orValue({})) ? variables.metas.filter(m, ` + q + ` in m.?annotations.orValue({}))[0].annotations[` + q + `] : '')`
	}
	label := quote(k.ProductLabel)
	vars := []admissionregistrationv1.Variable{
		{Name: VarGPUResource, Expression: res},
		{Name: VarPodMeta, Expression: `object.kind == 'Pod' ? object.?metadata.orValue({}) :
object.kind == 'CronJob' ? object.?spec.?jobTemplate.?spec.?template.?metadata.orValue({}) :
object.kind in ['Deployment', 'StatefulSet', 'Job'] ? object.?spec.?template.?metadata.orValue({}) : {}`},
		{Name: VarMetas, Expression: `object.kind == 'CronJob' ? [variables.podMeta, object.?spec.?jobTemplate.?metadata.orValue({}), object.?metadata.orValue({})] :
object.kind in ['Deployment', 'StatefulSet', 'Job'] ? [variables.podMeta, object.?metadata.orValue({})] : [object.?metadata.orValue({})]`},
		{Name: VarPodSpec, Expression: `object.kind == 'Pod' ? object.?spec.orValue({}) :
object.kind == 'CronJob' ? object.?spec.?jobTemplate.?spec.?template.?spec.orValue({}) :
object.kind in ['Deployment', 'StatefulSet', 'Job'] ? object.?spec.?template.?spec.orValue({}) : {}`},
		{Name: VarContainers, Expression: `variables.podSpec.?containers.orValue([])`},
		{Name: VarInitContainers, Expression: `variables.podSpec.?initContainers.orValue([])`},
		{Name: VarContainerGPUs, Expression: `variables.containers.map(c, ` + gpusOf + `)`},
		{Name: VarInitGPUs, Expression: `variables.initContainers.map(c, ` + gpusOf + `)`},
		// A sidecar is an init container whose restartPolicy is Always: it
		// runs beside the app containers. The peak while init container i
		// runs is the sidecars started before it plus its own GPUs, whether
		// it is a sidecar or not.
		{Name: VarSidecarGPUs, Expression: `variables.initContainers.transformList(i, c, c.?restartPolicy.orValue('') == 'Always' ? variables.initGPUs[i] : 0).sum()`},
		{Name: VarInitPeaks, Expression: `variables.initContainers.transformList(i, c,
  variables.initContainers.transformList(j, d, j < i && d.?restartPolicy.orValue('') == 'Always' ? variables.initGPUs[j] : 0).sum() + variables.initGPUs[i])`},
		{Name: VarGPUs, Expression: `variables.initPeaks.size() > 0 && variables.initPeaks.max() > variables.containerGPUs.sum() + variables.sidecarGPUs ?
  variables.initPeaks.max() : variables.containerGPUs.sum() + variables.sidecarGPUs`},
		// The products of each node selector term that can match a node:
		// those every In requirement on the product label of the term
		// admits; a term without one admits every product.
		{Name: VarProductTerms, Expression: `variables.podSpec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])
  .filter(t, t.?matchExpressions.orValue([]).size() > 0 || t.?matchFields.orValue([]).size() > 0)
  .map(t, t.?matchExpressions.orValue([]).filter(r, r.key == ` + label + ` && r.operator == 'In').map(r, r.?values.orValue([])))`},
		{Name: VarGPUProducts, Expression: `variables.metas.exists(m, ` + quote(annotations.GPUProduct) + ` in m.?annotations.orValue({})) ?
  ` + key(annotations.GPUProduct) + `.split(',').map(p, p.trim()).filter(p, p != '').distinct() :
  variables.productTerms.exists(ins, ins.size() == 0) ? [] :
  variables.productTerms.map(ins, ins[0].filter(p, ins.all(v, p in v))).flatten().distinct().sort()`},
		{Name: VarModel, Expression: key(annotations.Model)},
		{Name: VarModelScheme, Expression: `variables.model.indexOf('://') > 0 ? variables.model.substring(0, variables.model.indexOf('://')) : ''`},
		{Name: VarModelHost, Expression: `variables.modelScheme in ['oci', 'https'] ?
  variables.model.substring(variables.model.indexOf('://') + 3).split('/')[0] : ''`},
		{Name: VarModelBucket, Expression: `variables.modelScheme in ['s3', 'gs'] ?
  variables.model.substring(variables.model.indexOf('://') + 3).split('/')[0] : ''`},
		{Name: VarOwner, Expression: `object.?metadata.?labels[?` + quote(annotations.OwnerLabel) + `].orValue('')`},
		{Name: VarTeam, Expression: `object.?metadata.?labels[?` + quote(annotations.TeamLabel) + `].orValue('')`},
		{Name: VarClaims, Expression: `variables.podSpec.?resourceClaims.orValue([]).map(c, c.name)`},
		{Name: VarParameters, Expression: params},
	}
	return vars, nil
}

// reservedNames are modelgate's variable names.
var reservedNames = []string{
	VarInScope, VarExcepted, VarGPUResource, VarPodMeta, VarMetas, VarPodSpec, VarContainers, VarInitContainers, VarContainerGPUs, VarInitGPUs,
	VarSidecarGPUs, VarInitPeaks, VarGPUs, VarProductTerms, VarGPUProducts, VarModel, VarModelScheme, VarModelHost, VarModelBucket, VarOwner, VarTeam, VarClaims, VarParameters,
}

// quote is s as a CEL string literal, whatever s holds (a user's value:
// quotes, backslashes, newlines): Go's quoting of valid UTF-8 is a CEL
// string literal of the same value, as cel-go's own unparser writes it
// (escapes \a \b \f \n \r \t \v \\ \", \x for the other control
// characters, \u and \U above). Bytes that are not UTF-8, which Go would
// write as \x escapes that CEL reads as code points, become U+FFFD as a
// JSON decoder makes them: no Kubernetes object holds them. FuzzQuote holds
// the CEL parser's reading of every quote(s) to s.
func quote(s string) string {
	return strconv.Quote(strings.ToValidUTF8(s, "\uFFFD"))
}

// literal is v, a decoded JSON value, as a CEL literal. Every element of a
// list and value of a map is dyn(...), as the API server's CEL refuses
// lists and maps of mixed types (homogeneous aggregate literals).
func literal(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(v), nil
	case string:
		return quote(v), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64) + dotIfWhole(v), nil
	case interface{ String() string }: // json.Number
		s := v.String()
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return s, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "", fmt.Errorf("number %s: %w", s, err)
		}
		return literal(f)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			l, err := literal(e)
			if err != nil {
				return "", err
			}
			parts[i] = "dyn(" + l + ")"
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			l, err := literal(v[k])
			if err != nil {
				return "", err
			}
			parts[i] = quote(k) + ": dyn(" + l + ")"
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	default:
		return "", fmt.Errorf("a value of type %T cannot be a CEL literal", v)
	}
}

// dotIfWhole makes a whole float64 a CEL double literal ("2" is an int).
func dotIfWhole(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.ContainsAny(s, ".eE") || strings.Contains(s, "Inf") || strings.Contains(s, "NaN") {
		return ""
	}
	return ".0"
}
