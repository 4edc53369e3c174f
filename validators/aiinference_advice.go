package validators

import (
	"fmt"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/internal/modeldir"
)

// AIInferenceAdvice is what will likely not work as the user of an
// AIInference meant, admitted all the same: one message per problem, in
// words about its spec. Today: the triton preset given a model that
// modelgate's loader fetches, which Triton cannot serve (it takes the
// loader's .modelgate beside the model for a model of its repository and
// exits; docs/engines.md). s are the settings ValidateAIInference parsed
// from obj.
func AIInferenceAdvice(obj *servingv1.AIInference, s annotations.Settings) []string {
	var out []string
	spec := &obj.Spec
	if s.Serving.Engine == annotations.EngineTriton && s.Model != nil && s.Model.URI.Scheme != annotations.SchemePVC {
		out = append(out, fmt.Sprintf("spec.engine.name %s: Triton loads every directory of its model repository as a "+
			"model, and modelgate's loader keeps its state (%s) beside the model it fetches for %s, so Triton "+
			"fails to load that one and exits (the built-in preset passes --model-repository with the mount, and Triton "+
			"reads every repository it is given); give Triton its repository on a claim (spec.model.uri: pvc://<claim>)",
			servingv1.EngineTriton, modeldir.StateDir, spec.Model.URI))
	}
	return out
}
