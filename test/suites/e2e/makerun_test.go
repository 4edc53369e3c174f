package e2e_test

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

var devclusterBinary = flag.String("devcluster", "", "the program behind `make run` (default: <repo>/bin/devcluster, built by `make devcluster`)")

// prometheusBinary is what make run PROMETHEUS=1 runs beside the cluster.
var prometheusBinary = flag.String("prometheus", "", "the prometheus binary make run PROMETHEUS=1 runs (bin/prometheus-<version>, built by make test-e2e)")

// operatorBinary generates make run PROMETHEUS=1's Prometheus configuration.
var operatorBinary = flag.String("prometheus-operator", "", "the Prometheus Operator binary make run PROMETHEUS=1 runs (bin/prometheus-operator-<version>, built by make test-e2e)")

var _ = Describe("make run (bin/devcluster)", func() {
	It("prints the nodes, then where the sample's Pods land, and leaves no process behind on Ctrl-C", func(ctx SpecContext) {
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		binary := *devclusterBinary
		if binary == "" {
			binary = filepath.Join(root, "bin", "devcluster")
		}
		dir := GinkgoT().TempDir()
		out := gbytes.NewBuffer()
		Expect(*prometheusBinary).NotTo(BeEmpty(), "-prometheus is required (make test-e2e gives it)")
		Expect(*operatorBinary).NotTo(BeEmpty(), "-prometheus-operator is required (make test-e2e gives it)")
		cmd := exec.Command(binary, "--modelgate", filepath.Join(root, "bin", "modelgate"), "--dir", dir, "--user", "newcomer",
			"--prometheus", *prometheusBinary, "--prometheus-operator", *operatorBinary)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = out, out
		Expect(cmd.Start()).To(Succeed(), "run `make devcluster`")
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		DeferCleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
			}
		})

		Eventually(out).WithTimeout(2 * time.Minute).Should(gbytes.Say("Press Ctrl-C to stop everything"))
		Expect(string(out.Contents())).To(MatchRegexp(`(?m)^\s+gpu-h100-0\s+NVIDIA-H100-80GB-HBM3\s+81559\s+8\s+192\s+2000Gi\s+True$`))
		Expect(string(out.Contents())).To(MatchRegexp(`(?m)^\s+cpu-0\s+-\s+-\s+-\s+32\s+128Gi\s+True$`))

		By("every component is a child process")
		children, err := cluster.Descendants(cmd.Process.Pid)
		Expect(err).NotTo(HaveOccurred())
		names := make([]string, 0, len(children))
		for _, n := range children {
			names = append(names, n)
		}
		// /proc's comm is cut to 15 characters.
		Expect(names).To(ContainElements("etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kwok", "modelgate",
			filepath.Base(*prometheusBinary)[:min(15, len(filepath.Base(*prometheusBinary)))]))

		By("PROMETHEUS=1: Prometheus scrapes modelgate with config/prometheus's scraper token")
		api := regexp.MustCompile(`curl -s (http://127\.0\.0\.1:\d+)/api/v1/alerts`).FindStringSubmatch(string(out.Contents()))
		Expect(api).To(HaveLen(2), "make run prints Prometheus's API")
		Eventually(func(g Gomega) {
			targets, err := prometheus.API{URL: api[1]}.ActiveTargets(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			up := map[string]string{}
			for _, t := range targets {
				up[t.Labels["job"]] = t.Health + " " + t.LastError
			}
			g.Expect(up).To(HaveKeyWithValue("modelgate-metrics", "up "))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		By("the sample Deployment lands on an H100 node, and make run says so")
		kc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
		Expect(err).NotTo(HaveOccurred())
		dev, err := client.New(kc, client.Options{Scheme: scheme.Scheme})
		Expect(err).NotTo(HaveOccurred())
		sample, err := os.ReadFile(filepath.Join(root, "config", "samples", "deployment.yaml"))
		Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{}
		Expect(yaml.UnmarshalStrict(sample, d)).To(Succeed())
		d.Namespace = "default"
		Expect(dev.Create(ctx, d)).To(Succeed())
		Eventually(out).WithTimeout(time.Minute).Should(gbytes.Say(`pod default/llm-server-\S+: on gpu-h100-\d \(NVIDIA-H100-80GB-HBM3\), Running`))

		By("the sample policies: the backstop puts their ValidatingAdmissionPolicies in force, and a hung modelgate leaves them so")
		Expect(env.Apply(ctx, dev, filepath.Join(root, "config", "samples", "policies"))).To(Succeed())
		wps, err := builders.SamplePolicies(filepath.Join(root, "config", "samples", "policies"))
		Expect(err).NotTo(HaveOccurred())
		var want []string
		for _, wp := range wps {
			want = append(want, celform.Name(wp.Name))
		}
		Eventually(func(g Gomega) {
			generated := map[string]bool{}
			var vaps admissionregistrationv1.ValidatingAdmissionPolicyBindingList
			g.Expect(dev.List(ctx, &vaps, client.MatchingLabels{celform.ManagedByLabel: celform.ManagedBy})).To(Succeed())
			for _, b := range vaps.Items {
				generated[b.Name] = true
			}
			g.Expect(generated).To(HaveLen(len(want)))
			for _, n := range want {
				g.Expect(generated).To(HaveKey(n))
			}
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		var modelgatePid int
		for pid, name := range children {
			if name == "modelgate" {
				modelgatePid = pid
			}
		}
		Expect(modelgatePid).NotTo(BeZero())
		Expect(syscall.Kill(modelgatePid, syscall.SIGSTOP)).To(Succeed())
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				Expect(syscall.Kill(modelgatePid, syscall.SIGCONT)).To(Succeed())
			}
		}
		DeferCleanup(resume)
		// The API server enforces a binding once its informers have it: the
		// first refusal may take a moment after the bindings appear (each
		// try waits out the hung modelgate's webhook timeout, then ignores
		// it).
		// The sample as written (d is as modelgate injected it).
		over := &appsv1.Deployment{}
		Expect(yaml.UnmarshalStrict(sample, over)).To(Succeed())
		over.ObjectMeta = metav1.ObjectMeta{Name: "over-the-limit", Namespace: "default"}
		sixteen := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")}
		over.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: sixteen, Requests: sixteen}
		Eventually(func(g Gomega) {
			err := dev.Create(ctx, over, client.DryRunAll)
			g.Expect(err).To(HaveOccurred())
			// The API server names the first policy that refuses: over the
			// limit, and uninjected (no owner recorded), it breaks two.
			g.Expect(err.Error()).To(MatchRegexp(`ValidatingAdmissionPolicy 'modelgate-(max-gpus-per-pod|required-owner-team)' .*denied request: \[(max-gpus-per-pod|required-owner-team)\] `))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		resume()

		By("Ctrl-C")
		Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
		Eventually(exited).WithTimeout(time.Minute).Should(Receive(BeNil()))
		Expect(out).To(gbytes.Say("stopped; nothing left running"))
		for pid, name := range children {
			Expect(cluster.Alive(pid)).To(BeFalse(), "%s (pid %d) outlived make run", name, pid)
		}
		_, err = os.Stat(filepath.Join(dir, "kubeconfig"))
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "the kubeconfig is left behind: %v", err)
	}, SpecTimeout(8*time.Minute))
})
