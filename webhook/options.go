package webhook

import (
	"maps"
	"slices"

	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/internal/seal"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
	policyview "github.com/modelgate/modelgate/policies/workload"
)

// recordKey is the key sealing modelgate's reserved metadata: the
// Configuration's, or the process's own where none was loaded.
func recordKey(cfg *config.Configuration) *seal.Key {
	if cfg.RecordKey != nil {
		return cfg.RecordKey
	}
	return seal.Ephemeral()
}

// mutatorOptions turns the Configuration's injection settings into the
// mutators' options, once, when the handler is built.
func mutatorOptions(cfg *config.Configuration) *mutators.Options {
	in := &cfg.Injection
	o := &mutators.Options{
		Seal: recordKey(cfg),
		Loader: mutators.LoaderOptions{
			Image:           in.Loader.Image,
			Command:         append([]string(nil), in.Loader.Command...),
			Args:            slices.Clone(in.Loader.Args),
			SecurityContext: in.Loader.SecurityContext.DeepCopy(),
			Schemes:         map[annotations.Scheme]mutators.LoaderImage{},
			PullPolicy:      in.Loader.PullPolicy,
			ImageVolumes: mutators.ImageVolumeOptions{
				All:          in.Loader.ImageVolumes,
				Repositories: slices.Clone(in.ImageVolumes.Repositories),
				HubMirror:    in.ImageVolumes.HubMirror,
			},
		},
		GPU: mutators.GPUOptions{
			ResourceName: corev1.ResourceName(in.GPU.ResourceName),
			ProductLabel: in.GPU.ProductLabel,
			MemoryLabel:  in.GPU.MemoryLabel,
			TaintKey:     in.GPU.TaintKey,
			Allocation:   annotations.Allocation(in.GPU.Allocation),
			DRA:          draOptions(&in.GPU.DRA),
		},
		Probes: mutators.ProbeOptions{
			Presets:       mutators.DefaultProbePresets(),
			PeriodSeconds: in.Probes.PeriodSeconds,
		},
	}
	for _, v := range in.Loader.Env {
		o.Loader.Env = append(o.Loader.Env, corev1.EnvVar{Name: v.Name, Value: v.Value})
	}
	if in.Loader.Resources != nil {
		o.Loader.Resources = *in.Loader.Resources.DeepCopy()
	}
	for scheme, img := range in.Loader.Schemes {
		o.Loader.Schemes[annotations.Scheme(scheme)] = mutators.LoaderImage{
			Image: img.Image, Command: append([]string(nil), img.Command...),
			Args: slices.Clone(img.Args), SecurityContext: img.SecurityContext.DeepCopy(),
		}
	}
	for engine, p := range in.Probes.Presets {
		o.Probes.Presets[annotations.EngineName(engine)] = mutators.ProbePreset{Port: p.Port, Path: p.Path}
	}
	return o
}

// gpuKeys are the GPU names the policies' workload view reads.
func gpuKeys(in *config.Injection) policyview.GPUKeys {
	return policyview.GPUKeys{
		ResourceName:     corev1.ResourceName(in.GPU.ResourceName),
		ProductLabel:     in.GPU.ProductLabel,
		MemoryLabel:      in.GPU.MemoryLabel,
		DRA:              draOptions(&in.GPU.DRA),
		GPUDeviceClasses: slices.Clone(in.GPU.DRA.GPUDeviceClasses),
	}
}

// draOptions are the DRA names the mutators and the policy view share.
func draOptions(d *config.GPUDRA) gpuclaim.Options {
	return gpuclaim.Options{
		Driver:           d.Driver,
		DeviceClassName:  d.DeviceClassName,
		ProductAttribute: d.ProductAttribute,
		MemoryCapacity:   d.MemoryCapacity,
		Products:         maps.Clone(d.Products),
	}
}
