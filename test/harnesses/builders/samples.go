package builders

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// SampleGPUProducts are the GPU products config/samples/deployment.yaml
// asks for: an A100 or an H100, both allowed by the policy library.
const SampleGPUProducts = "NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3"

// SampleServingAnnotations are the opt-in annotations of the vLLM server
// in config/samples/deployment.yaml: Llama 3.1 8B pinned to a commit (a
// model every library policy allows), 20Gi, engine vllm, one GPU of the
// products given (SampleGPUProducts in the sample), 900 seconds of
// warm-up. The benchmarks and the soak send it as the typical GPU
// workload.
func SampleServingAnnotations(gpuProducts string) map[string]string {
	return map[string]string{
		annotations.Inject:        "true",
		annotations.Model:         "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
		annotations.ModelSize:     "20Gi",
		annotations.Engine:        "vllm",
		annotations.GPU:           "1",
		annotations.GPUProduct:    gpuProducts,
		annotations.WarmupTimeout: "900",
	}
}

// SamplePolicies reads the shipped policy library as its sample
// WorkloadPolicies (config/samples/policies, given as dir), with their
// realistic parameters, in file name order.
func SamplePolicies(dir string) ([]*policyv1.WorkloadPolicy, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*policyv1.WorkloadPolicy
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f) //nolint:gosec // a sample file the caller's directory holds, found by the glob above
		if err != nil {
			return nil, err
		}
		wp := &policyv1.WorkloadPolicy{}
		if err := yaml.UnmarshalStrict(data, wp); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, wp)
	}
	return out, nil
}

// ManyPolicies is n policies taken in turn from lib, each copy named
// apart (<name>-<i>): a cluster with n WorkloadPolicies.
func ManyPolicies(lib []*policyv1.WorkloadPolicy, n int) []*policyv1.WorkloadPolicy {
	out := make([]*policyv1.WorkloadPolicy, 0, n)
	for i := range n {
		wp := lib[i%len(lib)].DeepCopy()
		wp.Name = fmt.Sprintf("%s-%d", wp.Name, i)
		out = append(out, wp)
	}
	return out
}
