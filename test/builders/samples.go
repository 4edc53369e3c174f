package builders

import "github.com/modelgate/modelgate/api/annotations"

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
