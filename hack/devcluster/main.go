// Command devcluster is `make run`: it starts a local control plane (the
// same etcd and kube-apiserver the tests use), installs modelgate's RBAC
// and webhook configurations from config/, runs `modelgate serve` against
// it with generated serving certificates, writes bin/dev/kubeconfig and
// waits for Ctrl-C, then stops everything it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/env"
	"github.com/modelgate/modelgate/webhook/config"
)

func main() {
	binary := flag.String("modelgate", "bin/modelgate", "the modelgate binary to run")
	user := flag.String("user", defaultUser(), "the user name in bin/dev/kubeconfig (becomes the owner label)")
	flag.Parse()
	if err := run(*binary, *user); err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(1)
	}
}

func defaultUser() string {
	if u := os.Getenv("USER"); u != "" && u != "root" {
		return u
	}
	return "developer"
}

func run(binary, user string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := env.RepoRoot()
	if err != nil {
		return err
	}
	devDir := filepath.Join(root, "bin", "dev")
	if err := os.MkdirAll(devDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", devDir, err)
	}

	started := time.Now()
	te, err := env.New(root)
	if err != nil {
		return err
	}
	fmt.Println("starting etcd and kube-apiserver ...")
	adminCfg, err := te.Start()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		fmt.Println("stopping the control plane ...")
		if err := te.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the control plane: %v\n", err)
		}
		for _, f := range []string{"kubeconfig", "modelgate.kubeconfig", "configuration.yaml"} {
			_ = os.Remove(filepath.Join(devDir, f))
		}
		fmt.Println("stopped; nothing left running")
	}()

	admin, err := client.New(adminCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	// modelgate runs with config/rbac's permissions only, as in a cluster.
	modelgateUser, err := env.ModelgateIdentity(ctx, te, admin, root)
	if err != nil {
		return err
	}
	modelgateKubeconfig := filepath.Join(devDir, "modelgate.kubeconfig")
	if err := writeKubeconfig(modelgateUser, modelgateKubeconfig); err != nil {
		return err
	}
	// The developer is a cluster admin authenticating with a client
	// certificate, as a human with kubectl would.
	dev, err := te.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding user %s: %w", user, err)
	}
	kubeconfig := filepath.Join(devDir, "kubeconfig")
	if err := writeKubeconfig(dev, kubeconfig); err != nil {
		return err
	}

	// The samples land in "default": give it a team, so they show the
	// modelgate.io/team label too.
	if err := labelDefaultNamespace(ctx, admin); err != nil {
		return err
	}

	healthAddr, err := freeAddr()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(devDir, "configuration.yaml")
	if err := writeConfiguration(te.WebhookInstallOptions, healthAddr, cfgPath); err != nil {
		return err
	}

	cmd := exec.CommandContext(ctx, binary, "serve", "--config", cfgPath, "--kubeconfig", modelgateKubeconfig) //nolint:gosec // the developer's own binary.
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Its own process group: Ctrl-C reaches devcluster only, which then
	// sends modelgate one SIGTERM (a second signal would make it exit at once).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 40 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := waitReady(ctx, "http://"+healthAddr+"/readyz", exited); err != nil {
		return err
	}
	printUsage(root, kubeconfig, time.Since(started))

	select {
	case <-ctx.Done():
		fmt.Println("\ninterrupted: stopping modelgate ...")
		// CommandContext reports the cancellation itself as the error.
		if err := <-exited; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "modelgate: %v\n", err)
		}
	case err := <-exited:
		return fmt.Errorf("modelgate exited: %w", err)
	}
	return nil
}

// sampleTeam is the team "default" gets in the dev cluster.
const sampleTeam = "ml-platform"

func labelDefaultNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, ns); err != nil {
		return fmt.Errorf("reading namespace default: %w", err)
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[annotations.NamespaceTeam] = sampleTeam
	if err := c.Update(ctx, ns); err != nil {
		return fmt.Errorf("labelling namespace default: %w", err)
	}
	return nil
}

// writeKubeconfig writes a user's kubeconfig, readable by the owner only.
func writeKubeconfig(u *envtest.AuthenticatedUser, path string) error {
	b, err := u.KubeConfig()
	if err != nil {
		return fmt.Errorf("building kubeconfig: %w", err)
	}
	if _, err := clientcmd.Load(b); err != nil {
		return fmt.Errorf("checking kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writeConfiguration writes the Configuration modelgate serves with: the
// envtest-generated certificates and port, metrics off, health on a free
// local port.
func writeConfiguration(w envtest.WebhookInstallOptions, healthAddr, path string) error {
	c := config.New()
	c.Webhook.Host = w.LocalServingHost
	c.Webhook.Port = int32(w.LocalServingPort) //nolint:gosec // a local port number.
	c.Webhook.CertDir = w.LocalServingCertDir
	c.Metrics.BindAddress = "0"
	c.Health.BindAddress = healthAddr
	if errs := c.Validate(); len(errs) > 0 {
		return fmt.Errorf("dev configuration: %w", errs.ToAggregate())
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding configuration: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

func waitReady(ctx context.Context, url string, exited <-chan error) error {
	deadline := time.After(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted before modelgate was ready")
		case err := <-exited:
			return fmt.Errorf("modelgate exited before it was ready: %w", err)
		case <-deadline:
			return errors.New("modelgate was not ready within 60s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printUsage(root, kubeconfig string, took time.Duration) {
	rel, err := filepath.Rel(root, kubeconfig)
	if err != nil {
		rel = kubeconfig
	}
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	fmt.Printf(`
modelgate is running in a local control plane (ready in %s).

  export KUBECONFIG=%s
  %s --kubeconfig %s apply -f config/samples/
  %s --kubeconfig %s get deploy,job,pod -L modelgate.io/owner,modelgate.io/team
  %s --kubeconfig %s get deploy llm-server -o yaml
  %s --kubeconfig %s get aiinferences.v1alpha1.serving.modelgate.io llama-sglang -o yaml
  %s --kubeconfig %s apply -k config/samples/policies
  %s --kubeconfig %s get workloadpolicies

The samples include an AIInference in each of v1alpha1, v1beta1 and v1,
all stored as v1; read any of them in any version (the v1alpha1 read of
llama-sglang carries its v1-only fields in an annotation).
The namespace "default" is labelled modelgate.io/team=%s. With the sample
policies applied, the samples' Job and Pod are denied (model bucket, GPU
product): delete and re-apply them to see the answers.
There is no scheduler or kubelet here: workloads are stored and admitted,
not run. Press Ctrl-C to stop everything.
`, took.Round(100*time.Millisecond), rel, kubectl, rel, kubectl, rel, kubectl, rel, kubectl, rel, kubectl, rel, kubectl, rel, sampleTeam)
}
