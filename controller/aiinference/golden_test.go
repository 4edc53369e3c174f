package aiinference

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden Deployments under testdata (TestSampleDeployments)")

// samples are config/samples' AIInferences, one per version, and the
// golden file of each one's Deployment as the webhook decorates it.
var samples = map[string]string{
	"serving_v1alpha1_aiinference.yaml": "llama-alpha.deployment.yaml",
	"serving_v1beta1_aiinference.yaml":  "mistral-beta.deployment.yaml",
	"serving_v1_aiinference.yaml":       "llama-sglang.deployment.yaml",
}

// developer creates the samples.
var developer = authenticationv1.UserInfo{Username: "developer"}

// TestSampleDeployments admits each sample as the API server would (to
// v1, defaulted, its owner sealed), builds its Deployment, admits that as
// modelgate's service account, and compares the result with its golden
// file (seals masked: the offline key is made per process). The golden
// files are what the controller writes and the webhook makes of it.
func TestSampleDeployments(t *testing.T) {
	cfg := config.New()
	admitter, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, nil), offline.Namespaces{})
	if err != nil {
		t.Fatal(err)
	}
	for sample, golden := range samples {
		t.Run(sample, func(t *testing.T) {
			got := decoratedSample(t, admitter, cfg, sample)
			out, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			out = []byte(builders.MaskSeals(string(out)))
			path := filepath.Join("testdata", golden)
			if *updateGolden {
				if err := os.WriteFile(path, out, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./controller/aiinference -run TestSampleDeployments -update)", err)
			}
			if diff := cmp.Diff(string(want), string(out)); diff != "" {
				t.Errorf("%s (-golden +got):\n%s", path, diff)
			}
		})
	}
}

// TestSampleEqualsHandWritten: the v1alpha1 sample's Deployment, decorated
// by the webhook, has the pod template and replicas of the Deployment a
// user would write by hand for the same model (testdata/hand/llama-alpha.yaml),
// decorated by the same webhook: one injection path.
func TestSampleEqualsHandWritten(t *testing.T) {
	cfg := config.New()
	admitter, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, nil), offline.Namespaces{})
	if err != nil {
		t.Fatal(err)
	}
	fromController := decoratedSample(t, admitter, cfg, "serving_v1alpha1_aiinference.yaml")
	js := readJSON(t, filepath.Join("testdata", "hand", "llama-alpha.yaml"))
	out, err := admitter.Admit(context.Background(), offline.Request{Object: js, Namespace: "default", User: developer})
	if err != nil || out.Decision != offline.Allowed {
		t.Fatalf("admitting the hand-written Deployment: %v %v %v", err, out.Decision, out.Denials)
	}
	var byHand appsv1.Deployment
	if err := json.Unmarshal(out.Object, &byHand); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{fromController, &byHand} {
		delete(d.Spec.Template.Annotations, annotations.Seal)
	}
	if diff := cmp.Diff(byHand.Spec, fromController.Spec); diff != "" {
		t.Errorf("Deployment spec (-by hand +from the AIInference):\n%s", diff)
	}
}

// decoratedSample is a sample's Deployment as the webhook leaves it.
func decoratedSample(t *testing.T, admitter *offline.Admitter, cfg *config.Configuration, sample string) *appsv1.Deployment {
	t.Helper()
	js := readJSON(t, filepath.Join("..", "..", "config", "samples", sample))
	out, err := admitter.Admit(context.Background(), offline.Request{Object: js, Namespace: "default", User: developer})
	if err != nil || out.Decision != offline.Allowed {
		t.Fatalf("admitting %s: %v %v %v", sample, err, out.Decision, out.Denials)
	}
	ai := &servingv1.AIInference{}
	if err := json.NewDecoder(bytes.NewReader(out.Object)).Decode(ai); err != nil {
		t.Fatal(err)
	}
	got, raw := admittedDeployment(t, admitter, ai, authenticationv1.UserInfo{Username: cfg.ControllerUsername()})
	if got.Labels[annotations.OwnerLabel] != "developer" || !strings.Contains(string(raw), annotations.Injected) {
		t.Fatalf("%s's Deployment: owner %q, injected %v", sample, got.Labels[annotations.OwnerLabel], strings.Contains(string(raw), annotations.Injected))
	}
	return got
}

// admittedDeployment is the AIInference's Deployment as the webhook
// admits it from user, decoded and as JSON; anything but an allowance
// fails the test.
func admittedDeployment(t *testing.T, admitter *offline.Admitter, ai *servingv1.AIInference, user authenticationv1.UserInfo) (*appsv1.Deployment, []byte) {
	t.Helper()
	d, err := Deployment(ai, DefaultEngines)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	out, err := admitter.Admit(context.Background(), offline.Request{Object: raw, Namespace: ai.Namespace, User: user})
	if err != nil || out.Decision != offline.Allowed {
		t.Fatalf("admitting %s's Deployment as %s: %v %v %v", ai.Name, user.Username, err, out.Decision, out.Denials)
	}
	got := &appsv1.Deployment{}
	if err := json.Unmarshal(out.Object, got); err != nil {
		t.Fatal(err)
	}
	return got, out.Object
}

// readJSON reads a YAML file as JSON.
func readJSON(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
