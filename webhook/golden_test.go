package webhook

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook/decode"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden (TestGolden)")

const (
	goldenDir       = "testdata/golden"
	goldenNamespace = "ml-research"
	updateHint      = "run `go test ./webhook -run TestGolden -update` to accept the new output"
	// goldenConfig is the Configuration of the golden cases, which render's
	// test reads too (cmd/modelgate/render_test.go).
	goldenConfig = "testdata/golden-config.yaml"
)

// goldenNamespaces has the one namespace of the golden inputs: a team, no
// namespace-wide opt-in (the objects opt in themselves).
var goldenNamespaces = fakeNamespaces{goldenNamespace: {annotations.NamespaceTeam: "research"}}

// TestGolden admits each testdata/golden/<case>.in.yaml as a CREATE by
// alice through the real handler (the Configuration of goldenConfig: the
// defaults and a profile), applies the patch to the object as the API
// server sends it, and compares the result with <case>.out.yaml. The
// output must be a fixed point: admitting it again, as an UPDATE or as a
// repeated CREATE, patches nothing.
func TestGolden(t *testing.T) {
	h := NewMutating(loadGoldenConfig(t), goldenNamespaces, NewMetrics(nil))
	ctx := context.Background()
	for name, in := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			obj := readGoldenInput(t, in)
			resp := h.Handle(ctx, obj.request(admissionv1.Create, obj.raw, nil))
			if !resp.Allowed || len(patchesOf(resp)) == 0 {
				t.Fatalf("allowed=%v patches=%d result=%+v, want an allowed patch", resp.Allowed, len(patchesOf(resp)), resp.Result)
			}
			out := applyPatch(t, obj.raw, resp)
			got, err := yaml.JSONToYAML(out)
			if err != nil {
				t.Fatalf("converting the output to YAML: %v", err)
			}

			got = []byte(builders.MaskSeals(string(got)))
			outPath := filepath.Join(goldenDir, name+".out.yaml")
			if *updateGolden {
				if err := os.WriteFile(outPath, got, 0o644); err != nil {
					t.Fatalf("writing %s: %v", outPath, err)
				}
			}
			want, err := os.ReadFile(outPath)
			if err != nil {
				t.Fatalf("reading %s: %v; %s", outPath, err, updateHint)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s differs from the injected output (-want +got):\n%s\n%s", outPath, diff, updateHint)
			}

			again := map[string]admission.Request{
				"update":       obj.request(admissionv1.Update, out, out),
				"reinvocation": obj.request(admissionv1.Create, out, nil),
			}
			for how, req := range again {
				resp := h.Handle(ctx, req)
				if !resp.Allowed || len(patchesOf(resp)) > 0 {
					t.Errorf("%s of the output: allowed=%v patches=%s result=%+v, want allowed without a patch",
						how, resp.Allowed, toJSON(t, patchesOf(resp)), resp.Result)
				}
			}
		})
	}
}

// loadGoldenConfig loads the golden cases' Configuration.
func loadGoldenConfig(t *testing.T) *config.Configuration {
	t.Helper()
	c, err := config.Load(goldenConfig)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// goldenInputs maps each golden case's name to its input file.
func goldenInputs(t *testing.T) map[string]string {
	t.Helper()
	ins, err := filepath.Glob(filepath.Join(goldenDir, "*.in.yaml"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("no golden inputs in %s (err %v)", goldenDir, err)
	}
	out := make(map[string]string, len(ins))
	for _, in := range ins {
		out[strings.TrimSuffix(filepath.Base(in), ".in.yaml")] = in
	}
	return out
}

// Every golden output belongs to an input: a renamed or removed case
// leaves no stale output behind.
func TestGoldenOutputsHaveInputs(t *testing.T) {
	outs, err := filepath.Glob(filepath.Join(goldenDir, "*.out.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range outs {
		in := strings.TrimSuffix(out, ".out.yaml") + ".in.yaml"
		if _, err := os.Stat(in); err != nil {
			t.Errorf("%s has no input %s: remove it", out, in)
		}
	}
}

// goldenInput is a golden case's object as the API server would send it.
type goldenInput struct {
	kind, name string
	raw        []byte
}

// readGoldenOutput reads <name>.out.yaml as JSON.
func readGoldenOutput(t *testing.T, name string) []byte {
	t.Helper()
	outYAML, err := os.ReadFile(filepath.Join(goldenDir, name+".out.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.YAMLToJSON(outYAML)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readGoldenInput reads a hand-written input strictly (a misspelt field
// fails the test) into its typed object and marshals that, so the request
// carries what the API server would: every field of the typed object.
func readGoldenInput(t *testing.T, path string) goldenInput {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	gvk, ok := gvks[tm.Kind]
	if !ok || tm.APIVersion != strings.TrimPrefix(gvk.Group+"/"+gvk.Version, "/") {
		t.Fatalf("%s: %s %s is not a kind modelgate injects", path, tm.APIVersion, tm.Kind)
	}
	obj := builders.Empty(tm.Kind)
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if obj.GetNamespace() != goldenNamespace || obj.GetName() == "" {
		t.Fatalf("%s: object %s/%s, want a name in namespace %s", path, obj.GetNamespace(), obj.GetName(), goldenNamespace)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return goldenInput{kind: tm.Kind, name: obj.GetName(), raw: raw}
}

// request is an admission request by alice for the object's kind and name.
func (g goldenInput) request(op admissionv1.Operation, raw, oldRaw []byte) admission.Request {
	r := request(g.kind, op, goldenNamespace, raw, oldRaw, alice, "system:authenticated")
	r.Name = g.name
	return r
}

// TestGoldenOptOut removes the opt-in from each golden output, as a user
// would on a workload modelgate injected, and admits that UPDATE: what
// modelgate injected goes, with the record, and the object is its input
// again but for the owner metadata, which stays as the record of who made
// it. A Pod's spec and a Job's pod template cannot change after creation:
// their opt-out patches nothing.
func TestGoldenOptOut(t *testing.T) {
	h := NewMutating(loadGoldenConfig(t), goldenNamespaces, NewMetrics(nil))
	ctx := context.Background()
	for name, in := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			obj := readGoldenInput(t, in)
			out := readGoldenOutput(t, name)
			optOut := editMetas(t, obj.kind, out, func(m *metav1.ObjectMeta) { delete(m.Annotations, annotations.Inject) })

			resp := h.Handle(ctx, obj.request(admissionv1.Update, optOut, out))
			if !resp.Allowed {
				t.Fatalf("opt-out denied: %+v", resp.Result)
			}
			if obj.kind == "Pod" || obj.kind == "Job" {
				if len(patchesOf(resp)) > 0 {
					t.Errorf("a %s's opt-out patched %s; its pod spec cannot change", obj.kind, toJSON(t, patchesOf(resp)))
				}
				return
			}
			reverted := applyPatch(t, optOut, resp)

			owners := metasOf(t, obj.kind, out)
			for i, m := range metasOf(t, obj.kind, reverted) {
				if got, want := m.Labels[annotations.OwnerLabel], owners[i].Labels[annotations.OwnerLabel]; got != want || got == "" {
					t.Errorf("metadata %d owner label %q, want %q kept", i, got, want)
				}
			}
			withoutOwner := func(m *metav1.ObjectMeta) {
				delete(m.Annotations, annotations.Inject)
				delete(m.Annotations, annotations.OwnerFull)
				delete(m.Labels, annotations.OwnerLabel)
				delete(m.Labels, annotations.TeamLabel)
				delete(m.Annotations, annotations.Seal)
			}
			// The user's own mounts of modelgate's volume go with it (the
			// user-loader case): left behind, they would make the object
			// invalid.
			want := decodeAs(t, obj.kind, withoutModelMounts(t, obj.kind, editMetas(t, obj.kind, obj.raw, withoutOwner)))
			got := decodeAs(t, obj.kind, editMetas(t, obj.kind, reverted, withoutOwner))
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("opted-out object differs from the input (-input +reverted):\n%s", diff)
			}

			again := h.Handle(ctx, obj.request(admissionv1.Update, reverted, reverted))
			if !again.Allowed || len(patchesOf(again)) > 0 {
				t.Errorf("updating the opted-out object: allowed=%v patches=%s, want allowed without a patch",
					again.Allowed, toJSON(t, patchesOf(again)))
			}
		})
	}
}

// editMetas applies edit to the object's metadata and every template's,
// and returns the object's JSON.
func editMetas(t *testing.T, kind string, raw []byte, edit func(*metav1.ObjectMeta)) []byte {
	t.Helper()
	d, err := decode.Whole[gvks[kind]](raw)
	if err != nil {
		t.Fatalf("decoding %s: %v", kind, err)
	}
	for _, m := range d.Target.Metas() {
		edit(m)
	}
	return toJSON(t, d.Obj)
}

// withoutModelMounts removes every mount of model-store from the object's
// containers and init containers, and returns the object's JSON.
func withoutModelMounts(t *testing.T, kind string, raw []byte) []byte {
	t.Helper()
	d, err := decode.Whole[gvks[kind]](raw)
	if err != nil {
		t.Fatalf("decoding %s: %v", kind, err)
	}
	spec := d.Target.PodSpec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			list[i].VolumeMounts = slices.DeleteFunc(list[i].VolumeMounts, func(vm corev1.VolumeMount) bool {
				return vm.Name == mutators.ModelVolumeName
			})
		}
	}
	return toJSON(t, d.Obj)
}

// TestGoldenUnsealed admits each golden output again as a CREATE whose
// seal does not verify: a template an older version injected, or a
// manifest copied from another namespace. Its record is not modelgate's,
// but the parts with modelgate's reserved names (the loader, the model
// volume and its mounts) are: the object is admitted, and its pod spec
// stays as it was.
func TestGoldenUnsealed(t *testing.T) {
	h := NewMutating(loadGoldenConfig(t), goldenNamespaces, NewMetrics(nil))
	for name, in := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			obj := readGoldenInput(t, in)
			out := readGoldenOutput(t, name) // its seals are "<seal>": none verifies
			resp := h.Handle(context.Background(), obj.request(admissionv1.Create, out, nil))
			if !resp.Allowed {
				t.Fatalf("an unsealed injected %s is refused: %+v", obj.kind, resp.Result)
			}
			spec := func(raw []byte) *corev1.PodSpec {
				d, err := decode.Whole[gvks[obj.kind]](raw)
				if err != nil {
					t.Fatal(err)
				}
				return d.Target.PodSpec
			}
			if diff := cmp.Diff(spec(out), spec(applyPatch(t, out, resp))); diff != "" {
				t.Errorf("pod spec changed (-golden +admitted again):\n%s", diff)
			}
		})
	}
}
