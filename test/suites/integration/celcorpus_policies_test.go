package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// corpusForm is a policy's generated ValidatingAdmissionPolicy and binding,
// as the celpolicy controller applies them when it enforces (Generate with
// the webhooks' scope and the exceptions in force), and, for a denying
// policy, its witness: a second binding of the same policy with the action
// Warn. The API server's answer names only the first denial of a request;
// its warnings name every validation that fails, of every policy.
type corpusForm struct {
	policy  string
	wp      *policyv1.WorkloadPolicy
	vap     *admissionregistrationv1.ValidatingAdmissionPolicy
	binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	witness *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// exceptions keys the exceptions vap was generated with.
	exceptions string
}

// corpusWitness prefixes the name of a witness binding.
const corpusWitness = "celcorpus-witness-"

// generateForm is the policy of wp as the celpolicy controller generates
// it with modelgate's default Configuration (its keys and the webhooks'
// scope) and the exceptions in force es.
func generateForm(wp *policyv1.WorkloadPolicy, es []policyv1.WorkloadPolicyException) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	GinkgoHelper()
	cfg := config.New()
	keys := celform.Keys{GPUResource: cfg.Injection.GPU.ResourceName, ProductLabel: cfg.Injection.GPU.ProductLabel}
	scope := celform.WebhookScope(append(slices.Clone(cfg.Injection.ExcludedNamespaces), cfg.Namespace))
	scope.Exceptions = celform.ExceptionsFor(wp.Name, es)
	vap, binding, err := celform.Generate(wp, keys, scope)
	Expect(err).NotTo(HaveOccurred(), wp.Name)
	return vap, binding
}

// corpusForms are the generated policies of the samples in dir that carry
// a CEL form, without exceptions.
func corpusForms(dir string) []*corpusForm {
	GinkgoHelper()
	wps, err := builders.SamplePolicies(dir)
	Expect(err).NotTo(HaveOccurred())
	var out []*corpusForm
	for _, wp := range wps {
		if wp.Spec.CEL == nil {
			continue
		}
		f := &corpusForm{policy: wp.Name, wp: wp}
		f.vap, f.binding = generateForm(wp, nil)
		if slices.Contains(f.binding.Spec.ValidationActions, admissionregistrationv1.Deny) {
			f.witness = f.binding.DeepCopy()
			f.witness.Name = corpusWitness + wp.Name
			f.witness.Labels = nil
			f.witness.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
		}
		out = append(out, f)
	}
	Expect(out).NotTo(BeEmpty(), "no sample in %s carries spec.cel", dir)
	return out
}

// useExceptions generates each policy again with the exceptions in force
// es where it was generated with others, as the celpolicy controller does
// when an exception is written or expires. It reports whether any changed,
// and why the API server refuses those it does.
func useExceptions(ctx context.Context, forms []*corpusForm, es []policyv1.WorkloadPolicyException) (changed bool, refused []string) {
	GinkgoHelper()
	for _, f := range forms {
		own := celform.ExceptionsFor(f.policy, es)
		key := exceptionsKey(own)
		if key == f.exceptions {
			continue
		}
		vap, binding := generateForm(f.wp, own)
		Expect(binding.Spec).To(Equal(f.binding.Spec), "%s: exceptions change the binding", f.policy)
		patched := f.vap.DeepCopy()
		patched.Spec = vap.Spec
		err := admin.Patch(ctx, patched, client.MergeFrom(f.vap))
		if apierrors.IsInvalid(err) {
			names := make([]string, 0, len(own))
			for _, ex := range own {
				names = append(names, ex.Namespace+"/"+ex.Name)
			}
			refused = append(refused, fmt.Sprintf("policy %s generated with the exceptions in force %v: the API server refuses it: %s",
				f.policy, names, shortened(err.Error(), 1000)))
			continue
		}
		Expect(err).NotTo(HaveOccurred(), "%s generated with the exceptions %s", f.policy, key)
		f.vap, f.exceptions, changed = patched, key, true
	}
	return changed, refused
}

// shortened is s cut to n runes.
func shortened(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// createPolicy creates the generated policy, not yet in force, and
// deletes it after the spec. It says why when the API server refuses it.
func createPolicy(ctx context.Context, f *corpusForm) string {
	GinkgoHelper()
	err := admin.Create(ctx, f.vap)
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		return err.Error()
	}
	Expect(err).NotTo(HaveOccurred(), f.vap.Name)
	DeferCleanup(deleteObject, f.vap)
	return ""
}

// bind creates the policy's binding, which puts it in force, and its
// witness, and deletes them after the spec.
func bind(ctx context.Context, f *corpusForm) {
	GinkgoHelper()
	for _, b := range []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{f.binding, f.witness} {
		if b != nil {
			Expect(admin.Create(ctx, b)).To(Succeed(), b.Name)
			DeferCleanup(deleteObject, b)
		}
	}
}

// warns reports a policy whose violations are warnings.
func (f *corpusForm) warns() bool {
	return slices.Contains(f.binding.Spec.ValidationActions, admissionregistrationv1.Warn)
}

// formNames are the names of the forms' policies.
func formNames(forms []*corpusForm) []string {
	out := make([]string, 0, len(forms))
	for _, f := range forms {
		out = append(out, f.policy)
	}
	return out
}

// inForceProbe is a ValidatingAdmissionPolicy and binding created after
// the generated ones, refusing ConfigMaps of its name with a message that
// changes with each change of the generated policies. The API server's
// policy source reads its policy and binding informers whole, and a watch
// delivers a kind's objects in the order they were written: once the probe
// refuses with its latest message, every policy and binding written before
// it is in force.
type inForceProbe struct {
	// name names the probe's policy, binding and ConfigMap; what its
	// message says.
	name, what string
	vap        *admissionregistrationv1.ValidatingAdmissionPolicy
	binding    *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	generation int
}

// corpusInForce names the probe's policy, binding and ConfigMap.
const corpusInForce = "celcorpus-in-force"

func (p *inForceProbe) message() string {
	return fmt.Sprintf("%s (%d)", p.what, p.generation)
}

// install creates the probe, deleted after the spec, and waits until the
// API server enforces it.
func (p *inForceProbe) install(ctx context.Context) {
	GinkgoHelper()
	p.name, p.what = corpusInForce, "the corpus's policies are in force"
	p.create(ctx)
	for _, obj := range p.objects() {
		DeferCleanup(deleteObject, obj)
	}
	p.wait(ctx)
}

// create creates the probe's policy and binding.
func (p *inForceProbe) create(ctx context.Context) {
	GinkgoHelper()
	p.vap = &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "probe", Expression: "object.metadata.name == '" + p.name + "'"}},
			Validations:     []admissionregistrationv1.Validation{{Expression: "false", Message: p.message()}},
		},
	}
	p.binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: p.name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	for _, obj := range p.objects() {
		Expect(admin.Create(ctx, obj)).To(Succeed())
	}
}

// objects are the probe's policy and binding.
func (p *inForceProbe) objects() []client.Object {
	return []client.Object{p.vap, p.binding}
}

// bump changes the probe's message after a change of the generated
// policies, and waits until the API server refuses with it.
func (p *inForceProbe) bump(ctx context.Context) {
	GinkgoHelper()
	before := p.vap.DeepCopy()
	p.generation++
	p.vap.Spec.Validations[0].Message = p.message()
	Expect(admin.Patch(ctx, p.vap, client.MergeFrom(before))).To(Succeed())
	p.wait(ctx)
}

func (p *inForceProbe) wait(ctx context.Context) {
	GinkgoHelper()
	Eventually(func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: p.name}}
		return admin.Create(ctx, cm, client.DryRunAll)
	}).Should(MatchError(ContainSubstring(p.message())))
}

// corpusOutOfForce names the policy, binding and ConfigMap of the probe
// waitOutOfForce creates.
const corpusOutOfForce = "celcorpus-out-of-force"

// waitOutOfForce waits, after the generated policies and bindings are
// deleted, until the API server no longer enforces them: it creates a
// policy and binding of its own and waits until they refuse their
// ConfigMap. The policy source's informers deliver a kind's changes in
// the order they were written, so by then both have seen every deletion
// before it. Its own probe stays in force a moment after it is deleted;
// it refuses only a ConfigMap of its name.
func waitOutOfForce(ctx context.Context) {
	GinkgoHelper()
	p := &inForceProbe{name: corpusOutOfForce, what: "the corpus's policies are out of force"}
	p.create(ctx)
	p.wait(ctx)
	for _, obj := range p.objects() {
		deleteObject(ctx, obj)
	}
}

// startPolicyStatusController runs kube-controller-manager's policy
// status controller, which type-checks each ValidatingAdmissionPolicy
// against the schemas of the resources it matches and writes
// status.typeChecking, until the spec's end. It needs kube-controller-manager
// beside kube-apiserver (`make test-integration` builds it), and reports
// whether it found it.
func startPolicyStatusController() bool {
	GinkgoHelper()
	kcm := filepath.Join(testEnv.BinaryAssetsDirectory, "kube-controller-manager")
	if _, err := os.Stat(kcm); err != nil {
		return false
	}
	user, err := testEnv.AddUser(envtest.User{Name: "celcorpus-policy-status", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600)).To(Succeed())
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(kcm, "--kubeconfig="+filepath.Join(dir, "kubeconfig"),
		"--controllers=validatingadmissionpolicy-status-controller",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
		if CurrentSpecReport().Failed() {
			b, _ := os.ReadFile(log.Name())
			AddReportEntry("kube-controller-manager's log", string(b))
		}
	})
	return true
}
