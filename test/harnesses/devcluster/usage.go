package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// printUsage prints the nodes and how to use the cluster, and returns the
// kubectl command line it tells the user to use.
func printUsage(root, kubeconfig string, took time.Duration, nodes, logDir, backstop string) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil {
			return r
		}
		return p
	}
	kc := rel(kubeconfig)
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	k := kubectl + " --kubeconfig " + kc
	fmt.Printf(`
modelgate is running in a simulated GPU cluster (ready in %s): a real
kube-apiserver, controller-manager and scheduler, and kwok playing the
kubelets of these fake nodes (config/dev/nodes.yaml):

%s
  export KUBECONFIG=%s
  %s apply -f config/samples/
  %s get pods -o wide -L modelgate.io/owner,modelgate.io/team
  %s get deploy llm-server -o yaml
  %s get aiinferences -o wide
  %s get aiinferences.v1alpha1.serving.modelgate.io llama-sglang -o yaml
  %s apply -k config/samples/policies
  %s get workloadpolicies
  %s get validatingadmissionpolicies,validatingadmissionpolicybindings
  %s get policyreports -A

Pods are scheduled for real (GPU counts, products, memory, taints); on
kwok's nodes kwok marks them Running (a Job's pods then Succeeded) and no
container runs.
Where each pod lands is printed below as it happens. The samples include an
AIInference in each of v1alpha1, v1beta1 and v1, all stored as v1; read any
of them in any version. modelgate's controller makes each a Deployment and a
Service, which its webhook decorates; their status shows Pending, Loading,
Ready or Failed, and why.
The namespace "default" is labelled modelgate.io/team=%s. With the sample
policies applied, the samples' Job and Pod are denied (model bucket, GPU
product): delete and re-apply them to see the answers. The audit judges
what already runs 15s after a policy change: the PolicyReports and the
policies' Failing column show what the sample policies find in the
samples already applied.
%s
Component logs: %s. Press Ctrl-C to stop everything.

`, took.Round(100*time.Millisecond), indent(nodes), kc, k, k, k, k, k, k, k, k, k, sampleTeam, backstop, rel(logDir))
	return k
}

// The usage's paragraph on the backstop: on in host mode, the chart's
// default (off) with --install helm.
const (
	backstopOn = `The backstop is on (policy.backstop): each sample policy's CEL form is a
ValidatingAdmissionPolicy (modelgate-<policy>) that the API server enforces
itself, so with modelgate stopped or hung (kill -STOP it) a workload that
breaks one is still refused; injection and modelgate's own checks then
fail open, and the audit reports what was admitted uninjected.`
	backstopChart = `The backstop (policy.backstop) is off, as in the chart's defaults; helm
upgrade --reuse-values --set configuration.policy.backstop=true puts each
sample policy's CEL form in force as a ValidatingAdmissionPolicy that the
API server enforces itself.`
)

// printRealNode says whether the real node runs, and if not, why; when
// it runs, where the samples land and how to watch their loaders.
func printRealNode(c *cluster.Cluster, k string) {
	switch {
	case c.RealNode != nil:
		fmt.Printf(`The real node %s runs Pods in real containers (kubelet, containerd, runc;
each Pod in its own network on the node's bridge; %d GPUs from a device
plugin; images from the registry on
%s, a stand-in engine for vLLM's, SGLang's and TGI's). In "default", the
Pods that name a serving engine (the sample Deployment's and the
AIInferences') prefer it: there the loader really downloads the samples'
model, hf://%s or s3://%s/%s (%d MiB, from a Hub
and an S3 store on the node's gateway that the Configuration's injection.loader.env
points the loaders at), and the engine serves it:

  %s get pods -o wide -w    # Init:0/1, PodInitializing, Running, then READY 1/1
  %s logs deploy/llm-server -c model-loader

Pods it cannot fit (GPUs, CPU, memory) go to kwok's nodes, as do the Job and the notebook (no stand-in runs
their images). Pods in a namespace labelled %s=true
all run there. Its logs: %s/kubelet.log and containerd.log.

`, c.RealNode.Name, c.RealNode.GPUs, c.RealNode.Registry, sampleHFRepo, sampleS3Bucket, sampleS3Prefix,
			sampleModelSize()>>20, k, k, cluster.RealNodeNamespaceLabel, c.LogDir)
	case c.RealNodeSkipped != "":
		fmt.Printf("No real node (kwok's nodes only): %s.\n\n", c.RealNodeSkipped)
	}
}

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("  " + line)
	}
	return b.String()
}
