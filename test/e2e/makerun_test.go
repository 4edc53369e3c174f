package e2e_test

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/env"
)

var devclusterBinary = flag.String("devcluster", "", "the program behind `make run` (default: <repo>/bin/devcluster, built by `make devcluster`)")

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
		cmd := exec.Command(binary, "--modelgate", filepath.Join(root, "bin", "modelgate"), "--dir", dir, "--user", "newcomer")
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
		children := descendants(cmd.Process.Pid)
		names := make([]string, 0, len(children))
		for _, n := range children {
			names = append(names, n)
		}
		// /proc's comm is cut to 15 characters.
		Expect(names).To(ContainElements("etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kwok", "modelgate"))

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
			Expect(alive(pid)).To(BeFalse(), "%s (pid %d) outlived make run", name, pid)
		}
		_, err = os.Stat(filepath.Join(dir, "kubeconfig"))
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "the kubeconfig is left behind: %v", err)
	}, SpecTimeout(5*time.Minute))
})

// descendants returns every process below pid, by pid, with its command
// name, from /proc.
func descendants(pid int) map[int]string {
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	parent := map[int]int{}
	comm := map[int]string{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(s[closing+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		parent[p], comm[p] = ppid, s[open+1:closing]
	}
	out := map[int]string{}
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				out[p] = comm[p]
				break
			}
		}
	}
	return out
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}
