// Package backstop_test proves the backstop (the Configuration's
// policy.backstop) on the simulated cluster: with every modelgate replica
// stopped, the API server itself refuses a GPU Pod that breaks a library
// policy, with the policy's message, and admits a compliant one,
// uninjected, since injection fails open; once modelgate is back, its
// audit names what was admitted uninjected. `make test-backstop` runs it
// with the -modelgate binary it builds.
package backstop_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/audit"
	"github.com/modelgate/modelgate/controller/celpolicy"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

var modelgateBinary = flag.String("modelgate", "", "the modelgate binary (bin/modelgate)")

const (
	team = "team-a"
	// gpuProduct is one the allowed-gpu-products sample allows.
	gpuProduct = "NVIDIA-H100-80GB-HBM3"
	// ownerPolicy is left out of the policies in force: its CEL form
	// refuses every workload modelgate has not recorded an owner on, so
	// with it nothing that opts in is admitted while modelgate is down
	// (docs/operations.md).
	ownerPolicy = "required-owner-team"
)

// TestOutage: with the backstop on and the library's CEL forms in force,
// every modelgate replica stopped, a GPU Pod over max-gpus-per-pod is
// refused by the API server with the policy's message at once; a compliant
// one is admitted, uninjected; after modelgate returns, the audit reports
// the uninjected Pod.
func TestOutage(t *testing.T) {
	logf.SetLogger(logr.Discard())
	if *modelgateBinary == "" {
		t.Fatal("-modelgate is required (make test-backstop gives it)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c, err := cluster.Start(ctx, cluster.Options{
		Root: root, Dir: filepath.Join(dir, "cluster"), Modelgate: *modelgateBinary, User: "developer",
		RealNode: cluster.RealNodeOptions{Mode: cluster.RealNodeOff},
		Backstop: true,
	})
	if err != nil {
		t.Fatalf("%v\nmodelgate.log (last lines):\n%s", err, cluster.Tail(filepath.Join(dir, "cluster", "logs", "modelgate.log"), 30))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs are in %s; modelgate.log (last lines):\n%s", c.LogDir, cluster.Tail(filepath.Join(c.LogDir, "modelgate.log"), 30))
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	scheme, err := env.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(c.Developer, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team, Labels: map[string]string{annotations.TeamLabel: "nlp"}}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	wps, err := builders.SamplePolicies(filepath.Join(root, "config", "samples", "policies"))
	if err != nil {
		t.Fatal(err)
	}
	var inForce []string
	for _, wp := range wps {
		if wp.Name == ownerPolicy {
			continue
		}
		if wp.Spec.CEL == nil {
			t.Fatalf("library policy %s has no CEL form", wp.Name)
		}
		if err := k8s.Create(ctx, wp); err != nil {
			t.Fatalf("creating WorkloadPolicy %s: %v", wp.Name, err)
		}
		inForce = append(inForce, wp.Name)
	}

	// modelgate up: each generated policy accepted by the API server, and
	// bound (policy.backstop).
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range inForce {
			var wp policyv1.WorkloadPolicy
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &wp); err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(wp.Status.Conditions, celpolicy.ConditionCELReady)
			if cond == nil || cond.Status != metav1.ConditionTrue {
				return false, nil
			}
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := k8s.Get(ctx, client.ObjectKey{Name: celform.Name(name)}, &b); err != nil {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the generated policies of %v are not all accepted and bound: %v", inForce, err)
	}
	// The API server enforces a new binding once its informers have it: a
	// dry run of the Pod over the limit shows when.
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, gpuPod("probe", 16), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'modelgate-max-gpus-per-pod'"), nil
	}); err != nil {
		t.Fatalf("the API server does not enforce modelgate-max-gpus-per-pod: %v", err)
	}

	// Every replica stopped.
	if err := c.StopModelgate(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	// Over the limit: refused at the first try, nothing waits on modelgate.
	err = k8s.Create(ctx, gpuPod("too-many", 16))
	firstRefusal := time.Since(stopped)
	switch {
	case err == nil:
		t.Fatal("a Pod asking for 16 GPUs was admitted while modelgate was down")
	case !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err):
		t.Fatalf("a Pod asking for 16 GPUs: %v, want the API server's policy refusing it", err)
	}
	for _, want := range []string{"ValidatingAdmissionPolicy 'modelgate-max-gpus-per-pod'", "[max-gpus-per-pod]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	t.Logf("modelgate stopped to the first refusal: %s (the first request, refused by the API server itself)", firstRefusal.Round(time.Millisecond))

	// Compliant: admitted, and uninjected, since injection failed open.
	ok := gpuPod("compliant", 1)
	if err := k8s.Create(ctx, ok); err != nil {
		t.Fatalf("a compliant GPU Pod while modelgate was down: %v", err)
	}
	if _, injected := ok.Annotations[annotations.Injected]; injected || len(ok.Spec.InitContainers) > 0 {
		t.Fatalf("the Pod admitted while modelgate was down was injected: %v, %d init containers", ok.Annotations, len(ok.Spec.InitContainers))
	}

	// modelgate back: its audit reports the Pod admitted uninjected.
	if err := c.StartModelgate(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var results []any
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		r := &unstructured.Unstructured{}
		r.SetGroupVersionKind(audit.PolicyReportGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: team, Name: audit.ReportName}, r); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		results, _, _ = unstructured.NestedSlice(r.Object, "results")
		return slices.ContainsFunc(results, uninjected("compliant")), nil
	})
	if err != nil {
		t.Fatalf("the audit does not report Pod %s/compliant as admitted uninjected: %v; results: %v", team, err, results)
	}
}

// uninjected matches the audit's result for a Pod that opted in and
// carries no injection.
func uninjected(name string) func(any) bool {
	return func(x any) bool {
		m, _ := x.(map[string]any)
		if m["policy"] != audit.InjectionPolicy || m["rule"] != "missing" || m["result"] != string(audit.Fail) {
			return false
		}
		res, _ := m["resources"].([]any)
		return slices.ContainsFunc(res, func(r any) bool {
			rm, _ := r.(map[string]any)
			return rm["kind"] == "Pod" && rm["name"] == name
		})
	}
}

// gpuPod is a vLLM server opted in for injection with the library's
// sample model and product, asking for gpus GPUs in its limits, as a
// user writes it: modelgate would add the loader and the probes.
func gpuPod(name string, gpus int64) *corev1.Pod {
	a := builders.SampleServingAnnotations(gpuProduct)
	a[annotations.GPU] = fmt.Sprint(gpus)
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: team, Annotations: a},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm", Image: "vllm/vllm-openai:v0.11.0",
			Args: []string{"--model", "/models/model"},
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": q},
			},
		}}},
	}
}
