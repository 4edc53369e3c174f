package makerun_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// devcluster is one `make run`.
type devcluster struct {
	cmd    *exec.Cmd
	out    *gbytes.Buffer
	exited chan error
	dir    string
}

// startDevcluster starts bin/devcluster with the real node required, in
// dir, with more flags args, and waits for it to say it is ready.
func startDevcluster(root, dir string, args ...string) *devcluster {
	binary, mg := *devclusterBinary, *modelgateBinary
	if binary == "" {
		binary = filepath.Join(root, "bin", "devcluster")
	}
	if mg == "" {
		mg = filepath.Join(root, "bin", "modelgate")
	}
	d := &devcluster{out: gbytes.NewBuffer(), exited: make(chan error, 1), dir: dir}
	d.cmd = exec.Command(binary, append([]string{"--modelgate", mg, "--dir", dir, "--user", "newcomer", "--real-node=on"}, args...)...)
	d.cmd.Dir = root
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	Expect(d.cmd.Start()).To(Succeed(), "run `make devcluster`")
	go func() { d.exited <- d.cmd.Wait() }()
	DeferCleanup(func() {
		if d.cmd.ProcessState == nil {
			// A failed spec: stop it as Ctrl-C does, so that the node is
			// cleaned up, and say what it printed.
			_ = d.cmd.Process.Signal(os.Interrupt)
			select {
			case <-d.exited:
			case <-time.After(2 * time.Minute):
				_ = d.cmd.Process.Kill()
			}
			AddReportEntry("make run's output", string(d.out.Contents()))
		}
	})
	// Until it is ready, an exit is a failure at once, with what it said
	// (the real node it could not start, in one line).
	Eventually(func(g Gomega) {
		select {
		case err := <-d.exited:
			d.exited <- err
			StopTrying(fmt.Sprintf("make run exited (%v) before it was ready:\n%s", err, d.out.Contents())).Now()
		default:
		}
		g.Expect(string(d.out.Contents())).To(ContainSubstring("Press Ctrl-C to stop everything"))
	}).WithTimeout(5*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "make run did not start")
	Expect(d.out).To(gbytes.Say("Press Ctrl-C to stop everything"))
	Eventually(d.out).WithTimeout(10 * time.Second).Should(gbytes.Say(`The real node \S+ runs Pods in real containers`))
	return d
}

// interrupt stops make run with Ctrl-C and checks that it stopped
// cleanly and that its real node left nothing on the machine.
func (d *devcluster) interrupt(root string) {
	children, err := cluster.Descendants(d.cmd.Process.Pid)
	Expect(err).NotTo(HaveOccurred())
	Expect(d.cmd.Process.Signal(os.Interrupt)).To(Succeed())
	Eventually(d.exited).WithTimeout(2*time.Minute).Should(Receive(BeNil()), "make run's exit")
	Expect(d.out).To(gbytes.Say("stopped; nothing left running"))
	for pid, name := range children {
		Expect(cluster.Alive(pid)).To(BeFalse(), "%s (pid %d) outlived make run", name, pid)
	}
	Expect(cluster.RealNodeLeftovers(root, d.dir)).To(BeEmpty(), "what the real node left on the machine")
}

var _ = Describe("make run (bin/devcluster) with the real node", func() {
	It("runs the samples' loaders and an engine on the real node, leaves nothing on Ctrl-C, and starts clean again right after", func(ctx SpecContext) {
		Expect(os.Geteuid()).To(Equal(0), "the real node needs root: run make test-e2e as root")
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		d := startDevcluster(root, dir)

		dev, cs, realNode := devClients(ctx, dir)

		By("scraping modelgate's metrics as make run prints, with the metrics reader's token")
		expectPrintedScrape(ctx, cs, d, `127\.0\.0\.1:\d+`)

		By("kubectl apply -f config/samples/")
		files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			b, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(b, &u.Object)).To(Succeed(), f)
			u.SetNamespace("default")
			Expect(dev.Create(ctx, u)).To(Succeed(), f)
		}

		By("the vLLM Deployment (hf://) and the v1beta1 AIInference (s3://): Init:0/1, then Running, then Ready, on the real node")
		for _, pod := range readyOnRealNode(ctx, cs, realNode, labels.Set{"app": "llm-server"}, labels.Set{"serving.modelgate.io/inference": "mistral-beta"}) {
			logs, err := cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{Container: mutators.LoaderContainerName}).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			AddReportEntry("kubectl logs "+pod.Name+" -c model-loader", string(logs))
			Expect(progressLines(logs)).To(BeNumerically(">=", 2), "the loader's progress lines:\n%s", logs)
			loader := slices.IndexFunc(pod.Status.InitContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == mutators.LoaderContainerName })
			Expect(loader).To(BeNumerically(">=", 0))
			term := pod.Status.InitContainerStatuses[loader].State.Terminated
			Expect(term).NotTo(BeNil())
			Expect(term.ExitCode).To(BeZero(), "the loader's termination message: %s", term.Message)
		}
		// make run prints what its own Pod informer sees, which may be a
		// moment behind the List that saw them Ready.
		Eventually(d.out).WithTimeout(time.Minute).Should(gbytes.Say(`pod default/\S+: on ` + regexp.QuoteMeta(realNode) + ` \(NVIDIA-H100-80GB-HBM3\), Running`))

		By("Ctrl-C")
		d.interrupt(root)

		By("a second make run right after starts clean, with the real node")
		again := startDevcluster(root, dir)
		again.interrupt(root)
	}, SpecTimeout(10*time.Minute))
})

var _ = Describe("make run INSTALL=helm (bin/devcluster --install helm)", func() {
	It("installs the chart's two replicas on the real node, which inject an applied sample, and leaves nothing on Ctrl-C", func(ctx SpecContext) {
		Expect(os.Geteuid()).To(Equal(0), "the real node needs root: run make test-e2e as root")
		Expect(*helmBinary).NotTo(BeEmpty(), "-helm is required (make test-e2e gives it)")
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		cmDir := *certManagerDir
		if cmDir == "" {
			cmDir = certmanager.Dir(root)
		}
		dir := GinkgoT().TempDir()
		started := time.Now()
		d := startDevcluster(root, dir, "--install", "helm", "--helm", *helmBinary, "--cert-manager", cmDir)
		AddReportEntry("make run INSTALL=helm ready after", time.Since(started).Round(100*time.Millisecond).String())
		Expect(string(d.out.Contents())).To(ContainSubstring("modelgate runs from the chart"))

		dev, cs, realNode := devClients(ctx, dir)

		By("the chart's two replicas Running on the real node, in its Pod network")
		pods := &corev1.PodList{}
		Expect(dev.List(ctx, pods, client.InNamespace("modelgate-system"), client.MatchingLabels{"app.kubernetes.io/name": "modelgate"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
			Expect(p.Spec.NodeName).To(Equal(realNode), p.Name)
			Expect(p.Spec.HostNetwork).To(BeFalse(), p.Name)
			Expect(p.Spec.Containers[0].Image).To(HavePrefix("ghcr.io/modelgate/modelgate:"), p.Name)
		}

		By("scraping a replica's metrics as make run prints, with the metrics reader's token")
		expectPrintedScrape(ctx, cs, d, `10\.250\.0\.\d+:8443`)

		By("kubectl apply -f config/samples/deployment.yaml: injected by the replicas")
		b, err := os.ReadFile(filepath.Join(root, "config", "samples", "deployment.yaml"))
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(b, &u.Object)).To(Succeed())
		u.SetNamespace("default")
		Expect(dev.Create(ctx, u)).To(Succeed())
		Expect(u.GetAnnotations()).To(HaveKey(annotations.Injected), "the sample Deployment came back without modelgate's record")
		Expect(u.GetLabels()).To(HaveKeyWithValue(annotations.TeamLabel, "ml-platform"), "the team make run gives \"default\"")
		inits, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "initContainers")
		Expect(err).NotTo(HaveOccurred())
		Expect(inits).To(ContainElement(HaveKeyWithValue("name", mutators.LoaderContainerName)), "the injected loader")

		By("Ctrl-C")
		d.interrupt(root)
	}, SpecTimeout(8*time.Minute))
})

// expectPrintedScrape scrapes modelgate's metrics at the address make run
// printed (host, a pattern) with a token of the reader it names, and
// checks that a request without a token is refused.
func expectPrintedScrape(ctx context.Context, cs kubernetes.Interface, d *devcluster, host string) {
	GinkgoHelper()
	m := regexp.MustCompile(`create token (\S+)\)" (https://` + host + `/metrics)`).FindStringSubmatch(string(d.out.Contents()))
	Expect(m).To(HaveLen(3), "make run prints how to scrape its metrics")
	tr, err := cs.CoreV1().ServiceAccounts("modelgate-system").CreateToken(ctx, m[1], &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	scrape := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m[2], nil)
		Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // InsecureSkipVerify: the metrics server's self-signed certificate.
		resp, err := hc.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
	code, body := scrape(tr.Status.Token)
	Expect(code).To(Equal(http.StatusOK), body)
	Expect(body).To(ContainSubstring("modelgate_mutating_reviews_total"))
	Expect(body).To(ContainSubstring("modelgate_policy_decision_cache_max_bytes"))
	code, _ = scrape("")
	Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "metrics without a token")
}

// devClients are the clients of make run's kubeconfig in dir, and the
// real node's name (there must be one).
func devClients(ctx context.Context, dir string) (client.Client, kubernetes.Interface, string) {
	GinkgoHelper()
	kc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	dev, err := client.New(kc, client.Options{})
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(kc)
	Expect(err).NotTo(HaveOccurred())
	nodes := &corev1.NodeList{}
	Expect(dev.List(ctx, nodes, client.MatchingLabels{cluster.RealNodeLabel: "real"})).To(Succeed())
	Expect(nodes.Items).To(HaveLen(1), "the real node")
	return dev, cs, nodes.Items[0].Name
}

// readyOnRealNode waits for the one Pod each selector selects to be
// Ready on node, having been seen initializing (the loader running)
// before, and returns them. It watches the namespace's Pods, so that it
// sees every status the kubelet writes, however briefly it lasts (a Pod
// may be Running for less than any polling interval before it is Ready).
func readyOnRealNode(ctx context.Context, cs kubernetes.Interface, node string, sels ...labels.Set) []*corev1.Pod {
	seen := make([][]string, len(sels))
	byName := make([]map[string]*corev1.Pod, len(sels))
	for i := range byName {
		byName[i] = map[string]*corev1.Pod{}
	}
	pods := make([]*corev1.Pod, len(sels))
	// done says whether every Pod is Ready on node, and if not, why.
	done := func() (bool, string) {
		for i, p := range pods {
			switch {
			case p == nil:
				return false, fmt.Sprintf("no one Pod of %v (%d)", sels[i], len(byName[i]))
			case p.Spec.NodeName != node:
				return false, fmt.Sprintf("%s landed on %q", p.Name, p.Spec.NodeName)
			case seen[i][len(seen[i])-1] != "Ready":
				return false, fmt.Sprintf("%s went through %v", p.Name, seen[i])
			}
		}
		return true, ""
	}
	why := "no Pod event yet"
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "default", fields.Everything())
	_, err := watchtools.UntilWithSync(wctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			return false, nil
		}
		for i, sel := range sels {
			if !labels.SelectorFromSet(sel).Matches(labels.Set(p.Labels)) {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(byName[i], p.Name)
			} else {
				byName[i][p.Name] = p
			}
			pods[i] = nil
			if len(byName[i]) != 1 {
				continue // not created yet, or replaced
			}
			for _, only := range byName[i] {
				pods[i] = only
			}
			if s := status(pods[i]); len(seen[i]) == 0 || seen[i][len(seen[i])-1] != s {
				seen[i] = append(seen[i], s)
			}
		}
		ready, reason := done()
		why = reason
		return ready, nil
	})
	Expect(err).NotTo(HaveOccurred(), why)
	for i, p := range pods {
		AddReportEntry(p.Name, strings.Join(seen[i], " -> "))
		Expect(seen[i]).To(ContainElement("Init:0/1"), "%s was never seen loading: %v", p.Name, seen[i])
		Expect(seen[i]).To(ContainElement("Running"), "%s: %v", p.Name, seen[i])
	}
	return pods
}

// status is what kubectl get pods shows of a Pod with one init container,
// with Ready for a Running Pod whose containers are all ready.
func status(p *corev1.Pod) string {
	for _, s := range p.Status.InitContainerStatuses {
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			if s.State.Terminated != nil {
				return "Init:Error"
			}
			return "Init:0/1"
		}
	}
	if p.Status.Phase != corev1.PodRunning {
		return string(p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return "Ready"
		}
	}
	return "Running"
}

// progressLines counts the loader's progress lines.
func progressLines(logs []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(logs))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "progress") && strings.Contains(sc.Text(), "fetching") {
			n++
		}
	}
	return n
}
