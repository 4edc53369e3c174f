package cluster

import (
	"context"
	"fmt"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RealNodeNamespaceLabel routes a namespace's Pods to the real node: in a
// namespace labelled RealNodeNamespaceLabel=true, every Pod is created
// with host networking, the real node's name as node selector and its
// taint tolerated, by a MutatingAdmissionPolicy of the cluster's. The
// real node has no Pod network (all traffic stays on loopback), so a Pod
// there must use the host's; this lets a published manifest, or the
// Deployment an AIInference becomes, run there unchanged.
const RealNodeNamespaceLabel = "simulated-cluster.modelgate.io/real-node"

// realNodePolicyName names the policy and its binding.
const realNodePolicyName = "simulated-cluster-real-node"

// installRealNodePlacement installs the policy and its binding.
func installRealNodePlacement(ctx context.Context, c client.Client, node string) error {
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: realNodePolicyName},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			FailurePolicy:      new(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: placementPatch(node)},
			}},
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: realNodePolicyName},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: realNodePolicyName,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{RealNodeNamespaceLabel: "true"}},
			},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// placementPatch is the policy's CEL: a JSON patch that turns host
// networking on, adds the node selector (beside any the Pod has) and
// appends the taint's toleration.
func placementPatch(node string) string {
	q := strconv.Quote
	toleration := `Object.spec.tolerations{key: ` + q(RealNodeTaint) + `, operator: "Exists", effect: "NoSchedule"}`
	return `[
  JSONPatch{op: "add", path: "/spec/hostNetwork", value: true},
  has(object.spec.nodeSelector) ?
    JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey(` + q(corev1.LabelHostname) + `), value: ` + q(node) + `} :
    JSONPatch{op: "add", path: "/spec/nodeSelector", value: {` + q(corev1.LabelHostname) + `: ` + q(node) + `}},
  has(object.spec.tolerations) ?
    JSONPatch{op: "add", path: "/spec/tolerations/-", value: ` + toleration + `} :
    JSONPatch{op: "add", path: "/spec/tolerations", value: [` + toleration + `]}
]`
}
