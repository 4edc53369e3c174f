package mutators

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// ServingProbesName is the ServingProbes mutator's stable name.
const ServingProbesName = "serving-probes"

// Fixed probe settings.
const (
	// readinessFailureThreshold: a serving pod leaves its Service after
	// three failed checks in a row.
	readinessFailureThreshold int32 = 3
	// probeTimeoutSeconds leaves a busy engine a little more than the
	// kubelet's default second to answer.
	probeTimeoutSeconds int32 = 2
)

// DefaultProbePresets are the serving port and readiness path of each
// engine's stock server, as its own image starts it.
func DefaultProbePresets() map[annotations.EngineName]ProbePreset {
	return map[annotations.EngineName]ProbePreset{
		// vLLM's OpenAI-compatible server (vllm serve): port defaults to 8000
		// (FrontendArgs.port in vllm/entrypoints/openai/cli_args.py); GET
		// /health answers 200 once the engine runs and 503 when it is dead
		// (vllm/entrypoints/serve/instrumentator/health.py). See
		// https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html.
		annotations.EngineVLLM: {Port: 8000, Path: "/health"},
		// SGLang (python -m sglang.launch_server): port defaults to 30000
		// (ServerArgs.port in python/sglang/srt/server_args.py); GET /health
		// is one of its native APIs (python/sglang/srt/entrypoints/http_server.py,
		// https://docs.sglang.ai/basic_usage/native_api.html). Its host
		// defaults to 127.0.0.1, which the kubelet cannot reach: the server
		// must be started with --host 0.0.0.0.
		annotations.EngineSGLang: {Port: 30000, Path: "/health"},
		// Text Generation Inference: the launcher's --port defaults to 3000
		// but reads the PORT variable, and the official image
		// (ghcr.io/huggingface/text-generation-inference) sets PORT=80 in its
		// Dockerfile; its docs run it as "docker run -p 8080:80". Pods run
		// that image, so 80; a launcher started outside it (a custom image
		// without PORT) listens on 3000 and needs modelgate.io/port: "3000".
		// GET /health: "Health check method", 200 when working, 503 when down
		// (docs/openapi.json in huggingface/text-generation-inference).
		annotations.EngineTGI: {Port: 80, Path: "/health"},
		// Triton Inference Server: HTTP on 8000 (gRPC 8001, metrics 8002);
		// GET /v2/health/ready answers 200 when the server and its models are
		// ready (KServe v2 protocol; docs/getting_started/quickstart.md in
		// triton-inference-server/server: "curl -v localhost:8000/v2/health/ready").
		annotations.EngineTriton: {Port: 8000, Path: "/v2/health/ready"},
		// NVIDIA Dynamo's frontend (python -m dynamo.frontend): --http-port,
		// else DYN_HTTP_PORT, defaults to 8000 (components/src/dynamo/
		// frontend/frontend_args.py); GET /health answers 503 until its first
		// discovery of models completes, 200 after, with or without workers
		// (lib/llm/src/http/service/health.rs). A worker (python -m
		// dynamo.vllm, ...) is probed at /health on its status server,
		// DYN_SYSTEM_PORT, which answers 503 until the worker registered
		// (see servingEndpoint). Set modelgate.io/health-path to
		// /v1/models/<model>/ready to keep a frontend out of its Service
		// until a worker serves that model (Dynamo 1.6 and later).
		annotations.EngineDynamo: {Port: 8000, Path: "/health"},
	}
}

// ServingProbes gives the serving container of a model server probes that
// know how long a model takes to load, when modelgate.io/engine names the
// engine:
//
//   - a readiness probe: HTTP GET of the health path on the serving port
//     every PeriodSeconds (default 5), failing after 3 misses;
//   - a startup probe on the same endpoint whose budget, failureThreshold
//     times the period, covers StartupBudget (rounded up): the warm-up,
//     raised for the pod's GPUs and model size unless
//     modelgate.io/warmup-timeout sets it, and what the container's own
//     probes already allow, so the kubelet does not kill a server still
//     loading its weights;
//   - the serving port in the container's ports, named "http" (or
//     "serving" when "http" names another port; a Dynamo worker's status
//     port "system"), unless a port with that number is declared already.
//
// The port is the one the engine really listens on (see servingEndpoint:
// the annotation, the engine's own flag or variable, the declared port, a
// profile's, the preset); the path is modelgate.io/health-path, else the
// engine's preset in ProbeOptions. The custom engine has no preset, and its
// settings always carry both.
//
// A probe or port the container already has is the user's and is kept:
// modelgate adds only what is missing. What it added itself it records in
// the Injected record (Target.Own) and updates on a later pass, so changing
// modelgate.io/port or the warm-up timeout of an injected workload moves the
// probes along, and removing modelgate.io/engine (or opting out) removes
// them. A workload that names no engine (a training Job, say) gets nothing.
type ServingProbes struct{}

var _ Mutator = ServingProbes{}

// Name implements Mutator.
func (ServingProbes) Name() string { return ServingProbesName }

// Mutate implements Mutator.
func (ServingProbes) Mutate(t *Target, in *Input) (bool, error) {
	s := in.Settings.Serving
	if s.Engine == "" || in.Container == NoContainer {
		return releaseProbes(t, in, ""), nil
	}
	if in.Options == nil {
		return false, errNoOptions
	}
	c, err := servingContainer(t, in)
	if err != nil {
		return false, err
	}
	if statusServerOff(c, in) {
		// A Dynamo worker with no status server serves nothing to probe
		// (Warnings says so).
		return releaseProbes(t, in, ""), nil
	}
	port, path, err := servingEndpoint(c, in)
	if err != nil {
		return false, err
	}
	period := in.Options.Probes.PeriodSeconds
	if period <= 0 {
		period = config.DefaultProbePeriodSeconds
	}
	budget := StartupBudget(c, in)

	changed := releaseProbes(t, in, c.Name)
	changed = setProbe(t, in, &c.ReadinessProbe, part(partReadinessProbe, c.Name),
		httpProbe(path, port, period, readinessFailureThreshold)) || changed
	changed = setProbe(t, in, &c.StartupProbe, part(partStartupProbe, c.Name),
		httpProbe(path, port, period, startupThreshold(budget, period))) || changed
	names := []string{"http", "serving"}
	if isDynamoWorker(c, servedEngine(c, s.Engine)) {
		names = []string{"system"} // its status server's, as Dynamo's operator names it
	}
	changed = declarePort(t, in, c, port, names) || changed
	return changed, nil
}

var errNoEndpoint = errors.New("no serving port or health path")

// servingEndpoint is the port and path the probes check. The path is
// modelgate.io/health-path, else the engine preset's. The port is the
// first of:
//
//  1. modelgate.io/port on the object itself;
//  2. the engine's own port setting in the container: its flag on the
//     engine's command line (--port; Triton's and Dynamo's frontend's
//     --http-port), else its variable (Text Generation Inference's PORT,
//     Dynamo's frontend's DYN_HTTP_PORT); for a Dynamo worker, its status
//     server's DYN_SYSTEM_PORT and nothing below;
//  3. the serving port the container declares (see declaredServingPort);
//  4. modelgate.io/port from the object's profile;
//  5. the engine preset's port.
func servingEndpoint(c *corev1.Container, in *Input) (int32, string, error) {
	s := in.Settings.Serving
	s.Engine = servedEngine(c, s.Engine)
	preset := in.Options.Probes.Presets[s.Engine]
	path := s.HealthPath
	if path == "" {
		path = preset.Path
	}
	ours := func(p corev1.ContainerPort) bool { return in.Previous.Owned(portPart(c.Name, p)) }
	var port int32
	switch {
	case s.Port != 0 && in.Settings.Explicit(annotations.Port):
		port = s.Port
	case isDynamoWorker(c, s.Engine):
		// Its status server's port, and nothing else: the ports it
		// declares (NIXL's, say) and the preset (the frontend's) are not
		// that server's.
		port = enginePort(c, s.Engine)
	default:
		port = enginePort(c, s.Engine)
		if port == 0 {
			port = declaredServingPort(c, preset.Port, ours)
		}
		if port == 0 {
			port = s.Port
		}
		if port == 0 {
			port = preset.Port
		}
	}
	if port <= 0 || path == "" {
		return 0, "", fmt.Errorf("%w for engine %s (port %d, path %q): set %s and %s, or give the engine a preset",
			errNoEndpoint, s.Engine, port, path, annotations.Port, annotations.HealthPath)
	}
	return port, path, nil
}

// statusServerOff reports whether the container is a Dynamo worker whose
// status server is off (DYN_SYSTEM_PORT unset or not a port: -1, the
// default, turns it off) and modelgate.io/port does not name a port to
// probe instead: the worker serves no HTTP endpoint at all.
func statusServerOff(c *corev1.Container, in *Input) bool {
	s := in.Settings.Serving
	s.Engine = servedEngine(c, s.Engine)
	named := s.Port != 0 && in.Settings.Explicit(annotations.Port)
	return isDynamoWorker(c, s.Engine) && !named && enginePort(c, s.Engine) == 0
}

// startupThreshold is the number of periods that covers the warm-up
// timeout, at least one.
func startupThreshold(warmup, period int32) int32 {
	n := (int64(warmup) + int64(period) - 1) / int64(period)
	return int32(min(max(n, 1), math.MaxInt32))
}

// httpProbe builds a probe with every field the API server would default
// spelled out, so the stored probe equals a freshly built one.
func httpProbe(path string, port, period, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		TimeoutSeconds:   probeTimeoutSeconds,
		SuccessThreshold: 1,
		FailureThreshold: failureThreshold,
	}
}

// setProbe puts want in the slot when it is empty, or when the previous
// pass's record says modelgate put the probe there (part). A probe the
// user wrote is kept. It reports whether the slot changed.
func setProbe(t *Target, in *Input, slot **corev1.Probe, part string, want *corev1.Probe) bool {
	switch {
	case *slot == nil:
	case in.Previous.Owned(part):
		if equality.Semantic.DeepEqual(*slot, want) {
			t.Own(part)
			return false
		}
	default:
		return false
	}
	*slot = want
	t.Own(part)
	return true
}

// declarePort makes sure the container declares the TCP port. The port
// entry modelgate added on an earlier pass follows a changed port, and goes
// when the user declares the port themselves. It reports whether the ports
// changed.
func declarePort(t *Target, in *Input, c *corev1.Container, port int32, names []string) bool {
	// A port is known by its number and name: a port the user declares
	// later with modelgate's number is not mistaken for modelgate's.
	ours := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return isTCP(p) && in.Previous.Owned(portPart(c.Name, p))
	})
	declared := false
	for i, p := range c.Ports {
		if i != ours && isTCP(p) && p.ContainerPort == port {
			declared = true
		}
	}
	switch {
	case declared && ours < 0:
		return false
	case declared:
		c.Ports = slices.Delete(c.Ports, ours, ours+1)
		return true
	case ours >= 0:
		p := &c.Ports[ours]
		changed := p.ContainerPort != port
		p.ContainerPort = port
		t.Own(portPart(c.Name, *p))
		return changed
	}
	p := corev1.ContainerPort{Name: portName(c.Ports, names), ContainerPort: port, Protocol: corev1.ProtocolTCP}
	c.Ports = append(c.Ports, p)
	t.Own(portPart(c.Name, p))
	return true
}

// portPart names a port modelgate declared, by number and name: a port the
// user declares later with modelgate's number is not mistaken for
// modelgate's.
func portPart(container string, p corev1.ContainerPort) string {
	return part(partContainerPort, container, strconv.Itoa(int(p.ContainerPort)), p.Name)
}

// releaseProbes removes the probes and port an earlier pass added to
// containers other than serving (all of them when serving is ""): the
// engine was removed, or the serving container changed. It reports whether
// the spec changed.
func releaseProbes(t *Target, in *Input, serving string) bool {
	changed := false
	for _, kind := range []string{partReadinessProbe, partStartupProbe} {
		for _, name := range in.Previous.ownedOf(kind) {
			c := containerNamed(t.PodSpec, name)
			if name == serving || c == nil {
				continue
			}
			slot := &c.ReadinessProbe
			if kind == partStartupProbe {
				slot = &c.StartupProbe
			}
			changed = changed || *slot != nil
			*slot = nil
		}
	}
	for _, rest := range in.Previous.ownedOf(partContainerPort) {
		name, _, _ := strings.Cut(rest, "/")
		c := containerNamed(t.PodSpec, name)
		if name == serving || c == nil {
			continue
		}
		owned := func(p corev1.ContainerPort) bool {
			return isTCP(p) && portPart(name, p) == part(partContainerPort, rest)
		}
		if slices.ContainsFunc(c.Ports, owned) {
			c.Ports = slices.DeleteFunc(slices.Clone(c.Ports), owned)
			if len(c.Ports) == 0 {
				c.Ports = nil
			}
			changed = true
		}
	}
	return changed
}

func isTCP(p corev1.ContainerPort) bool {
	return p.Protocol == "" || p.Protocol == corev1.ProtocolTCP
}

// portName is the first of names no other port has ("http", or
// "serving" when another port is named "http"), or no name when all are
// taken (a port name is optional).
func portName(ports []corev1.ContainerPort, names []string) string {
	for _, name := range names {
		if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == name }) {
			return name
		}
	}
	return ""
}
