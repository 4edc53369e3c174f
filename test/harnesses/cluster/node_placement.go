package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
)

// RealNodeNamespaceLabel routes a namespace's Pods to the real node, by a
// MutatingAdmissionPolicy of the cluster's: a published manifest, or the
// Deployment an AIInference becomes, runs there unchanged, in the node's
// Pod network (node_network.go). Its values:
//
//   - RealNodeRequired ("true"): every Pod of the namespace is created
//     with the real node's name as node selector and its taints (its own
//     and the GPU taint) tolerated, so it runs there or nowhere (the e2e
//     specs, and an install of modelgate into Pods: the real node is the
//     one node that runs containers).
//   - RealNodeServing ("serving"): the Pods that name a serving engine
//     (modelgate.io/engine: what the stand-in engine of the real node's
//     images stands in for) are created with the taint tolerated and the
//     real node preferred: they land there when it fits them (GPUs, CPU,
//     memory) and on kwok's nodes otherwise. Other Pods are left alone
//     (`make run`'s samples).
const RealNodeNamespaceLabel = "simulated-cluster.modelgate.io/real-node"

// The values of RealNodeNamespaceLabel.
const (
	RealNodeRequiredValue = "true"
	RealNodeServingValue  = "serving"
)

// realNodePolicyName names the required placement's policy and its
// binding, realNodeServingPolicyName the serving Pods'.
const (
	realNodePolicyName        = "simulated-cluster-real-node"
	realNodeServingPolicyName = "simulated-cluster-real-node-serving"
)

// realNodePreferenceWeight is the preferred node affinity's weight: the
// most there is, so that the scheduler's other scores (kwok's nodes are
// far bigger and emptier) do not outweigh it where the real node fits.
const realNodePreferenceWeight = 100

// installRealNodePlacement installs both policies and their bindings.
func installRealNodePlacement(ctx context.Context, c client.Client, node string) error {
	required := placementPolicy(realNodePolicyName, RealNodeRequiredValue, requiredPlacementPatch(node), nil)
	serving := placementPolicy(realNodeServingPolicyName, RealNodeServingValue, servingPlacementPatch(node),
		[]admissionregistrationv1.MatchCondition{{
			Name:       "names-a-serving-engine",
			Expression: `has(object.metadata.annotations) && ` + strconv.Quote(annotations.Engine) + ` in object.metadata.annotations`,
		}})
	for _, obj := range append(required, serving...) {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// placementPolicy is a policy patching Pods on creation, with its binding
// to the namespaces labelled RealNodeNamespaceLabel=value.
func placementPolicy(name, value, patch string, conditions []admissionregistrationv1.MatchCondition) []client.Object {
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			MatchConditions:    conditions,
			FailurePolicy:      new(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: patch},
			}},
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{RealNodeNamespaceLabel: value}},
			},
		},
	}
	return []client.Object{policy, binding}
}

// requiredPlacementPatch is the required placement's CEL: a JSON patch
// that adds the node selector (beside any the Pod has) and appends the
// tolerations of the node's taint and of the GPU taint.
func requiredPlacementPatch(node string) string {
	q := strconv.Quote
	return `[
  has(object.spec.nodeSelector) ?
    JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey(` + q(corev1.LabelHostname) + `), value: ` + q(node) + `} :
    JSONPatch{op: "add", path: "/spec/nodeSelector", value: {` + q(corev1.LabelHostname) + `: ` + q(node) + `}},
  ` + tolerationPatch() + `,
  JSONPatch{op: "add", path: "/spec/tolerations/-", value: Object.spec.tolerations{key: ` + strconv.Quote(ResourceGPU.String()) + `, operator: "Exists", effect: "NoSchedule"}}
]`
}

// servingPlacementPatch is the serving Pods' CEL: the real node preferred (a preferred node affinity term appended to any the
// Pod has) and the taint's toleration appended. Where the Pod has a node
// affinity without preferred terms (modelgate's GPU placement, on a
// Deployment's template), the node affinity is replaced whole, its
// required terms kept: adding the list alone at its path makes
// kube-apiserver v1.36.3 fail the request (a handler panic, seen by the
// client as "stream error: INTERNAL_ERROR").
func servingPlacementPatch(node string) string {
	const (
		affinity  = `Object.spec.affinity`
		nodeAff   = affinity + `.nodeAffinity`
		preferred = nodeAff + `.preferredDuringSchedulingIgnoredDuringExecution`
	)
	term := preferred + `{weight: ` + strconv.Itoa(realNodePreferenceWeight) + `, preference: ` + preferred + `.preference{matchExpressions: [` +
		preferred + `.preference.matchExpressions{key: ` + strconv.Quote(corev1.LabelHostname) + `, operator: "In", values: [` + strconv.Quote(node) + `]}]}}`
	return `[
  !has(object.spec.affinity) ?
    JSONPatch{op: "add", path: "/spec/affinity", value: ` + affinity + `{nodeAffinity: ` + nodeAff + `{preferredDuringSchedulingIgnoredDuringExecution: [` + term + `]}}} :
  !has(object.spec.affinity.nodeAffinity) ?
    JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity", value: ` + nodeAff + `{preferredDuringSchedulingIgnoredDuringExecution: [` + term + `]}} :
  !has(object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution) ?
    JSONPatch{op: "replace", path: "/spec/affinity/nodeAffinity", value: has(object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) ?
      ` + nodeAff + `{requiredDuringSchedulingIgnoredDuringExecution: object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, preferredDuringSchedulingIgnoredDuringExecution: [` + term + `]} :
      ` + nodeAff + `{preferredDuringSchedulingIgnoredDuringExecution: [` + term + `]}} :
    JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/-", value: ` + term + `},
  ` + tolerationPatch() + `
]`
}

// tolerationPatch appends the real node taint's toleration.
func tolerationPatch() string {
	toleration := `Object.spec.tolerations{key: ` + strconv.Quote(RealNodeTaint) + `, operator: "Exists", effect: "NoSchedule"}`
	return `has(object.spec.tolerations) ?
    JSONPatch{op: "add", path: "/spec/tolerations/-", value: ` + toleration + `} :
    JSONPatch{op: "add", path: "/spec/tolerations", value: [` + toleration + `]}`
}

// WaitServingPlacement waits until the serving placement acts on new Pods
// in namespace ns (labelled RealNodeServingValue): kube-apiserver loads
// admission policies and namespaces' labels from watches, a moment after
// they are written, and a Pod created before goes wherever the scheduler
// likes. It asks with server-side dry runs of a Pod that names an engine.
func WaitServingPlacement(ctx context.Context, c client.Client, ns string) error {
	return waitPlacement(ctx, c, ns, "serving", tolerates)
}

// WaitRequiredPlacement waits until the required placement acts on new
// Pods in namespace ns (labelled RealNodeRequiredValue, the real node
// named node): every Pod created there after it returns runs on the real
// node. Labelling a namespace takes effect in
// kube-apiserver's admission a moment later (its namespace informer), as
// creating the policies does; a Pod created before gets neither the
// toleration nor the node selector, and stays Pending.
func WaitRequiredPlacement(ctx context.Context, c client.Client, ns, node string) error {
	return waitPlacement(ctx, c, ns, "required", func(p *corev1.Pod) bool {
		return tolerates(p) && p.Spec.NodeSelector[corev1.LabelHostname] == node
	})
}

// tolerates says whether a Pod tolerates the real node's taint, which
// both placements add.
func tolerates(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == RealNodeTaint })
}

// waitPlacement polls with server-side dry runs of a Pod that names an
// engine until acts says the placement patched it.
func waitPlacement(ctx context.Context, c client.Client, ns, which string, acts func(*corev1.Pod) bool) error {
	_, err := WaitDryRun(ctx, c, func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placement-probe", Annotations: map[string]string{annotations.Engine: "vllm"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "modelgate/test-engine:latest"}}},
		}
	}, acts)
	if err != nil {
		return fmt.Errorf("waiting for the real node's %s placement in namespace %s: %w", which, ns, err)
	}
	return nil
}

// WaitDryRun creates the Pod newProbe makes with a server-side dry run,
// again and again, until acts says the Pod the API server admitted shows
// the change the caller waits for (the API server, its admission policies
// and modelgate see changes through watches, a moment after they are
// written). It returns the last Pod admitted; a refused dry run is an
// error.
func WaitDryRun(ctx context.Context, c client.Client, newProbe func() *corev1.Pod, acts func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, pollInterval, startTimeout, true, func(ctx context.Context) (bool, error) {
		probe := newProbe()
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, fmt.Errorf("creating a Pod in %s (dry run): %w", probe.Namespace, err)
		}
		last = probe
		return acts(probe), nil
	})
	return last, err
}
