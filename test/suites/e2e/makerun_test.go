package e2e_test

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

var devclusterBinary = flag.String("devcluster", "", "the program behind `make run` (default: <repo>/bin/devcluster, built by `make devcluster`)")

// prometheusBinary is what make run PROMETHEUS=1 runs beside the cluster.
var prometheusBinary = flag.String("prometheus", "", "the prometheus binary make run PROMETHEUS=1 runs (bin/prometheus-<version>, built by make test-e2e)")

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
		cmd := exec.Command(binary, "--modelgate", filepath.Join(root, "bin", "modelgate"), "--dir", dir, "--user", "newcomer",
			"--prometheus", *prometheusBinary)
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

		By("Ctrl-C")
		Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
		Eventually(exited).WithTimeout(time.Minute).Should(Receive(BeNil()))
		Expect(out).To(gbytes.Say("stopped; nothing left running"))
		for pid, name := range children {
			Expect(cluster.Alive(pid)).To(BeFalse(), "%s (pid %d) outlived make run", name, pid)
		}
		_, err = os.Stat(filepath.Join(dir, "kubeconfig"))
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "the kubeconfig is left behind: %v", err)
	}, SpecTimeout(5*time.Minute))
})
