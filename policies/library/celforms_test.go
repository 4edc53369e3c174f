package library_test

import (
	"context"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
)

// The CEL forms of required-owner-team and serving-readiness-probe
// re-implement in CEL what modelgate computes in Go: the owner label
// modelgate writes for a requester (mutators.OwnerLabelValue) and the
// serving container (mutators.ResolveContainer). These tests hold them to
// the Go on generated inputs, through offline's real pipeline (the webhooks,
// then each policy's Rego and CEL form), and show what the owner's CEL form
// does with objects modelgate never saw, as the API server judges them while
// modelgate is down. The library's cases (tests/owner-probes.cel.cases.yaml)
// are the named examples.

// pipeline admits objects through modelgate's webhooks as offline does,
// with the policies of the named samples and a record key of the test's,
// and judges what the webhooks admitted with the samples' CEL forms, as the
// API server judges the generated ValidatingAdmissionPolicies.
type pipeline struct {
	t     *testing.T
	a     *offline.Admitter
	forms []*celform.Policy
	ns    *corev1.Namespace
}

func newPipeline(t *testing.T, namespace string, nsLabels map[string]string, samples ...string) *pipeline {
	t.Helper()
	ctx := context.Background()
	cfg := config.New()
	key, err := seal.New([]byte(strings.Repeat("k", seal.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RecordKey = key
	var compiled []*policies.Compiled
	var forms []*celform.Policy
	for _, s := range samples {
		path := filepath.Join(samplesDir, s+".yaml")
		c, err := offline.LoadPolicies(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		compiled = append(compiled, c...)
		forms = append(forms, celForm(t, cfg, path))
	}
	a, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, compiled), offline.Namespaces{Default: nsLabels})
	if err != nil {
		t.Fatal(err)
	}
	labels := maps.Clone(nsLabels)
	labels[corev1.LabelMetadataName] = namespace
	return &pipeline{t: t, a: a, forms: forms, ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: labels}}}
}

// celForm is the sample's CEL form as modelgate generates it for cfg, in
// the webhooks' scope, compiled as the API server compiles it.
func celForm(t testing.TB, cfg *config.Configuration, path string) *celform.Policy {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wp policyv1.WorkloadPolicy
	if err := yaml.Unmarshal(data, &wp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	vap, binding, err := celform.Generate(&wp, celform.KeysOf(cfg), celform.ScopeOf(cfg))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	p, err := celform.Compile(vap, binding)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// admit creates obj as username: the webhooks' outcome, and the CEL forms'
// decision on the object they admitted (nil when the mutating webhook
// refused it). obj must name its namespace, the pipeline's.
func (p *pipeline) admit(obj map[string]any, username string) (offline.Outcome, *celform.Decision) {
	p.t.Helper()
	ctx := context.Background()
	u := offline.UserInfo(username, nil)
	out, err := p.a.Admit(ctx, offline.Request{Object: mustJSON(p.t, obj), Namespace: p.ns.Name, User: u})
	if err != nil {
		p.t.Fatalf("admitting as %q: %v", username, err)
	}
	if out.Decision == offline.Denied && !out.Checked {
		return out, nil
	}
	admitted := &unstructured.Unstructured{}
	if err := admitted.UnmarshalJSON(out.Object); err != nil {
		p.t.Fatal(err)
	}
	d := &celform.Decision{}
	for _, f := range p.forms {
		fd, err := f.Judge(ctx, celform.Request{
			Object: admitted, Operation: apiadmission.Create, Namespace: p.ns,
			UserInfo: &user.DefaultInfo{Name: u.Username, Groups: u.Groups},
		})
		if err != nil {
			p.t.Fatal(err)
		}
		d.Deny, d.Warn = append(d.Deny, fd.Deny...), append(d.Warn, fd.Warn...)
	}
	return out, d
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lines are the lines of ls that policy gave.
func lines(ls []string, policy string) []string {
	var out []string
	for _, l := range ls {
		if strings.HasPrefix(l, "["+policy+"] ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestOwnerInCEL: for requesters of every shape (mail addresses, names a
// label cannot hold, too long for one, service accounts, names with nothing
// printable), the owner modelgate writes on an opted-in Deployment is the
// one the CEL form reads as the requester's, and the Pod a ReplicaSet
// controller makes from the Deployment's sealed template is a controller's
// copy: both forms allow both.
func TestOwnerInCEL(t *testing.T) {
	const ns = "team-a"
	p := newPipeline(t, ns, map[string]string{"modelgate.io/team": "nlp"}, "required-owner-team")
	users := []string{
		"alice@example.com", "bob", "Bob.Smith", "_x_", "-lead.ing-", "@@", "ünïcödé", "日本語@example.jp",
		"system:serviceaccount:team-a:ci-deployer", "system:serviceaccount:team-a:", "system:serviceaccount::x",
		"system:serviceaccount:ns:a:b", "system:admin", "oidc:https://idp.example.com#alice",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.", 40) + "b",
		strings.Repeat("x", 53) + "..__--" + strings.Repeat("y", 20),
		"user with spaces\tand\ttabs",
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcXYZ019._-@:+/ é\u212a\x7f")
	for range 150 {
		n := 1 + r.IntN(90)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		users = append(users, b.String())
	}
	for _, u := range users {
		deploy := map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": ns},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "web"}, "annotations": map[string]any{"modelgate.io/inject": "true"}},
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "nginx", "image": "nginx:1.27"}}},
				},
			},
		}
		out, cel := p.admit(deploy, u)
		if out.Decision != offline.Allowed || cel == nil || len(cel.Deny) > 0 {
			t.Errorf("user %q: the Deployment is %s %v, CEL %+v", u, out.Decision, out.Denials, cel)
			continue
		}
		var stored map[string]any
		if err := json.Unmarshal(out.Object, &stored); err != nil {
			t.Fatal(err)
		}
		tmpl := stored["spec"].(map[string]any)["template"].(map[string]any)
		meta := tmpl["metadata"].(map[string]any)
		pod := map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{
				"name": "web-7d9f-x2x4q", "namespace": ns, "labels": meta["labels"], "annotations": meta["annotations"],
				"ownerReferences": []any{map[string]any{
					"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f",
					"uid": "6f1c1e5e-1111-4c1a-9d0e-000000000001", "controller": true,
				}},
			},
			"spec": tmpl["spec"],
		}
		for _, controller := range []string{"system:serviceaccount:kube-system:replicaset-controller", "system:kube-controller-manager"} {
			out, cel := p.admit(pod, controller)
			if out.Decision != offline.Allowed || cel == nil || len(cel.Deny) > 0 {
				t.Errorf("user %q: the Pod %s makes is %s %v, CEL %+v", u, controller, out.Decision, out.Denials, cel)
			}
		}
	}
}

// TestOwnerCELWithoutModelgate judges objects with the CEL form of
// required-owner-team alone, as the API server does while modelgate is
// down: nothing injected, nothing refused by the mutating webhook, no seal
// verified. Rego, seeing the same objects, refuses every one without a
// valid seal; the CEL form refuses what it can tell is not modelgate's, and
// allows what it cannot tell apart (allowedAlthoughForged).
func TestOwnerCELWithoutModelgate(t *testing.T) {
	ctx := context.Background()
	form := celForm(t, config.New(), filepath.Join(samplesDir, "required-owner-team.yaml"))
	const (
		madeUp = "v1.AAAAAAAAAAAAAAAAAAAAAA" // well formed, signed by no one
		alice  = "alice@example.com"
		carol  = "carol@example.com"
		rs     = "system:serviceaccount:kube-system:replicaset-controller"
	)
	owned := func(owner, full, team, sealValue string) map[string]any {
		labels := map[string]any{"app": "chat"}
		annotations := map[string]any{"modelgate.io/inject": "true"}
		for k, v := range map[string]string{"modelgate.io/owner": owner, "modelgate.io/team": team} {
			if v != "" {
				labels[k] = v
			}
		}
		for k, v := range map[string]string{"modelgate.io/owner-full": full, "modelgate.io/seal": sealValue} {
			if v != "" {
				annotations[k] = v
			}
		}
		return map[string]any{"labels": labels, "annotations": annotations}
	}
	pod := func(meta map[string]any, controlled bool) map[string]any {
		meta["name"] = "chat-7d9f-x2x4q"
		meta["namespace"] = "team-a"
		if controlled {
			meta["ownerReferences"] = []any{map[string]any{
				"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "chat-7d9f",
				"uid": "6f1c1e5e-1111-4c1a-9d0e-000000000001", "controller": true,
			}}
		}
		return map[string]any{
			"apiVersion": "v1", "kind": "Pod", "metadata": meta,
			"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.acme.internal/app:1"}}},
		}
	}
	aliceOwned := func() map[string]any { return owned("alice_example.com", alice, "nlp", madeUp) }
	tests := map[string]struct {
		obj, old map[string]any
		user     string
		// want is the CEL form's denial, "" when it allows the object.
		want string
		// allowedAlthoughForged marks an object the CEL form allows though
		// its seal is made up, where Rego (modelgate) refuses it: only the
		// seal's presence is checked, and without it the object is refused.
		allowedAlthoughForged bool
	}{
		"an opted-in object admitted uninjected is refused as Rego refuses it": {
			obj: pod(owned("", "", "", ""), false), user: alice,
			want: `[required-owner-team] labels modelgate.io/owner and modelgate.io/team are missing: modelgate records the creator of workloads that opt in and copies namespace "team-a"'s modelgate.io/team=nlp to them; annotate Pod "chat-7d9f-x2x4q" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`,
		},
		"the requester's own owner without a seal is refused": {
			obj: pod(owned("alice_example.com", alice, "nlp", ""), false), user: alice,
			want: `[required-owner-team] labels modelgate.io/owner and modelgate.io/team are missing: modelgate records the creator of workloads that opt in and copies namespace "team-a"'s modelgate.io/team=nlp to them; annotate Pod "chat-7d9f-x2x4q" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`,
		},
		"a malformed seal is no seal": {
			obj: pod(owned("alice_example.com", alice, "nlp", "v1.short"), false), user: alice,
			want: `[required-owner-team] labels modelgate.io/owner and modelgate.io/team are missing: modelgate records the creator of workloads that opt in and copies namespace "team-a"'s modelgate.io/team=nlp to them; annotate Pod "chat-7d9f-x2x4q" with modelgate.io/inject: "true" or label namespace "team-a" with modelgate.io/injection=enabled`,
		},
		"the requester's own owner and the namespace's team under a made-up seal are what modelgate would write": {
			obj: pod(aliceOwned(), false), user: alice, allowedAlthoughForged: true,
		},
		"the requester's owner without owner-full is not what modelgate writes": {
			obj: pod(owned("alice_example.com", "", "nlp", madeUp), false), user: alice,
			want: `[required-owner-team] label modelgate.io/owner=alice_example.com is not the requester's ("alice@example.com"), and no controller made Pod "chat-7d9f-x2x4q" from a template: the API server cannot verify modelgate.io/seal, so it accepts an owner only from the object's old version, the requester or a controller's template`,
		},
		"someone else's owner under a made-up seal is refused": {
			obj: pod(owned("bob", "", "nlp", madeUp), false), user: alice,
			want: `[required-owner-team] label modelgate.io/owner=bob is not the requester's ("alice@example.com"), and no controller made Pod "chat-7d9f-x2x4q" from a template: the API server cannot verify modelgate.io/seal, so it accepts an owner only from the object's old version, the requester or a controller's template`,
		},
		"a team other than the namespace's is refused": {
			obj: pod(owned("alice_example.com", alice, "finance", madeUp), false), user: alice,
			want: `[required-owner-team] label modelgate.io/team=finance is not namespace "team-a"'s modelgate.io/team=nlp, which modelgate copies to the workloads it admits: the API server cannot verify modelgate.io/seal, so it accepts no other team`,
		},
		"a controller's copy of a template under a made-up seal passes: the limit": {
			obj: pod(owned("bob", "", "nlp", madeUp), true), user: rs, allowedAlthoughForged: true,
		},
		"a controller's object with no controller reference is refused": {
			obj: pod(owned("bob", "", "nlp", madeUp), false), user: rs,
			want: `[required-owner-team] label modelgate.io/owner=bob is not the requester's ("system:serviceaccount:kube-system:replicaset-controller"), and no controller made Pod "chat-7d9f-x2x4q" from a template: the API server cannot verify modelgate.io/seal, so it accepts an owner only from the object's old version, the requester or a controller's template`,
		},
		"a person is no controller, whatever the object's references say": {
			obj: pod(owned("bob", "", "nlp", madeUp), true), user: alice,
			want: `[required-owner-team] label modelgate.io/owner=bob is not the requester's ("alice@example.com"), and no controller made Pod "chat-7d9f-x2x4q" from a template: the API server cannot verify modelgate.io/seal, so it accepts an owner only from the object's old version, the requester or a controller's template`,
		},
		"an update by someone else keeping the owner is allowed": {
			obj: pod(aliceOwned(), false), old: pod(aliceOwned(), false), user: carol, allowedAlthoughForged: true,
		},
		"an update taking the owner over is refused, even as the requester's": {
			obj: pod(owned("carol_example.com", carol, "nlp", madeUp), false), old: pod(aliceOwned(), false), user: carol,
			want: `[required-owner-team] label modelgate.io/owner=carol_example.com is not the owner before this update (alice_example.com), which modelgate keeps: the API server cannot verify modelgate.io/seal, so it accepts an owner only from the object's old version, the requester or a controller's template`,
		},
		"an update dropping the owner-full is refused": {
			obj: pod(owned("alice_example.com", "", "nlp", madeUp), false), old: pod(aliceOwned(), false), user: carol,
			want: `[required-owner-team] label modelgate.io/owner=alice_example.com is not the owner before this update (alice_example.com), which modelgate keeps: the API server cannot verify modelgate.io/seal, so it accepts an owner only from the object's old version, the requester or a controller's template`,
		},
		"an update keeping the owner and changing the team to another is refused": {
			obj: pod(owned("alice_example.com", alice, "finance", madeUp), false), old: pod(aliceOwned(), false), user: carol,
			want: `[required-owner-team] label modelgate.io/team=finance is not namespace "team-a"'s modelgate.io/team=nlp nor the team before this update, which modelgate copies to the workloads it admits: the API server cannot verify modelgate.io/seal, so it accepts no other team`,
		},
		"an update keeping an owner and a team the namespace no longer has is allowed": {
			obj: pod(owned("alice_example.com", alice, "vision", madeUp), false), old: pod(owned("alice_example.com", alice, "vision", madeUp), false),
			user: carol, allowedAlthoughForged: true,
		},
		"a controller's copy keeps the template's team": {
			obj: pod(owned("bob", "", "vision", madeUp), true), user: rs, allowedAlthoughForged: true,
		},
		"an update of an object without an owner takes the requester's": {
			obj: pod(aliceOwned(), false), old: pod(owned("", "", "", ""), false), user: alice,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := celform.Request{
				Object: &unstructured.Unstructured{Object: tc.obj}, Operation: apiadmission.Create,
				Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"modelgate.io/team": "nlp", corev1.LabelMetadataName: "team-a"}}},
				UserInfo:  &user.DefaultInfo{Name: tc.user, Groups: []string{"system:authenticated"}},
			}
			if tc.old != nil {
				req.OldObject, req.Operation = &unstructured.Unstructured{Object: tc.old}, apiadmission.Update
			}
			d, err := form.Judge(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Matched {
				t.Fatal("the CEL form does not match the object")
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if diff := cmp.Diff(want, d.Deny); diff != "" {
				t.Errorf("denials (-want +got):\n%s", diff)
			}
			if !tc.allowedAlthoughForged {
				return
			}
			if tc.want != "" {
				t.Fatal("a case allowed although forged wants no denial")
			}
			// What the CEL form allows there it allows on the seal's
			// presence alone: without it, the same object is refused.
			unsealed := (&unstructured.Unstructured{Object: tc.obj}).DeepCopy()
			unstructured.RemoveNestedField(unsealed.Object, "metadata", "annotations", "modelgate.io/seal")
			req.Object = unsealed
			if d, err := form.Judge(ctx, req); err != nil || len(d.Deny) == 0 {
				t.Errorf("without its seal the object is still allowed (%v)", err)
			}
		})
	}
}

// TestServingContainerInCEL generates workloads that do not opt in (so
// that modelgate injects no probe) and judges each with
// serving-readiness-probe's Rego and CEL form: where the CEL form can see
// what decides the serving container (no profile), its warnings are Rego's,
// word for word, so it singles out the container modelgate's view does.
func TestServingContainerInCEL(t *testing.T) {
	const ns = "serving"
	p := newPipeline(t, ns, map[string]string{"modelgate.io/policy-scope": "all"}, "serving-readiness-probe")
	names := []string{"vllm", "vllm-server", "server", "app", "sidecar", "sglang", "tgi", "text-generation", "triton-proxy", "model", "log-shipper", "tritonserver"}
	images := []string{
		"vllm/vllm-openai:v0.6.3", "docker.io/vllm/vllm-openai@sha256:3b8e4a0f", "localhost/VLLM:dev", "localhost:5000/VLLM",
		"registry.acme.internal:5000/sglang/custom:1", "lmsysorg/sglang:v0.3.0", "ghcr.io/huggingface/text-generation-inference:2.4",
		"my-tgi:1", "nvcr.io/nvidia/tritonserver:24.08-py3", "nvcr.io/nvidia/TR\u0130TONSERVER", "vllm:latest", "registry:5000",
		"busybox:1.36", "python:3.12", "registry.acme.internal/runtime:2", "", "tritonserver/", "a/b/c/vllm-openai",
	}
	commands := [][]string{
		nil, {"vllm", "serve", "/models"}, {"python", "-m", "vllm.entrypoints.openai.api_server"}, {"python3", "-m", "vllm.entrypoints.api_server"},
		{"sh", "-c", "cd /srv; 'tritonserver' --model-repository=/m;"}, {"/opt/bin/text-generation-launcher"}, {"sglang", "serve"},
		{"python3", "-m", "sglang.launch_server", "--host", "0.0.0.0"}, {"$(BIN)", "serve"}, {"vllm", "--version"}, {"\"vllm\"", "serve;"},
		{"--tritonserver"}, {"vllm/", "serve"}, {"/"}, {"vllm\u00a0serve"}, {"vllm\u2003serve"}, {"vllm\vserve"}, {"bash", "-c", "exec \"/usr/bin/vllm\" serve x"},
		{"vllm", "$(CMD)"}, {"$(PREFIX)/vllm", "serve"}, {"vllm\u0085serve"}, {"/usr/bin/vllm//", "serve"}, {"text-generation-launcher;;"}, {"''"}, {"vllm", "serve", "&&", "tritonserver"},
	}
	engines := []string{"vllm", "sglang", "tgi", "triton", "custom", "VLLM", ""}
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	served, all := 0, 0 // workloads warned about one serving container, about all
	for i := range 1000 {
		n := 1 + r.IntN(4)
		containers := make([]any, 0, n)
		var used []string
		for len(containers) < n {
			name := pick(names)
			if slices.Contains(used, name) {
				continue
			}
			used = append(used, name)
			c := map[string]any{"name": name, "image": pick(images)}
			cmd := commands[r.IntN(len(commands))]
			if len(cmd) > 0 {
				split := r.IntN(len(cmd) + 1)
				if split > 0 {
					c["command"] = cmd[:split]
				}
				if split < len(cmd) {
					c["args"] = cmd[split:]
				}
			}
			if r.IntN(3) == 0 {
				c["env"] = []any{map[string]any{"name": "BIN", "value": "vllm"}, map[string]any{"name": "CMD", "value": "serve"}}
			}
			switch r.IntN(4) {
			case 0:
				c["resources"] = map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}
			case 1:
				c["resources"] = map[string]any{"requests": map[string]any{"nvidia.com/gpu": "1"}, "limits": map[string]any{"nvidia.com/gpu": "1"}}
			}
			if r.IntN(2) == 0 {
				c["readinessProbe"] = map[string]any{"httpGet": map[string]any{"path": "/health", "port": 8000}}
			}
			containers = append(containers, c)
		}
		podAnn, objAnn := map[string]any{}, map[string]any{}
		put := func(key, value string) {
			switch r.IntN(3) {
			case 0:
				podAnn[key] = value
			case 1:
				objAnn[key] = value
			default: // both, the pod's overriding
				podAnn[key], objAnn[key] = value, "decoy"
			}
		}
		if e := pick(engines); e != "" {
			put("modelgate.io/engine", e)
		}
		switch r.IntN(5) {
		case 0:
			put("modelgate.io/container", used[r.IntN(len(used))])
		case 1:
			put("modelgate.io/container", pick([]string{"missing", "Bad_Name", "-x", strings.Repeat("a", 64)}))
		}
		if r.IntN(10) == 0 {
			put("modelgate.io/profile", "vllm-small")
		}
		spec := map[string]any{"containers": containers}
		var obj map[string]any
		if r.IntN(2) == 0 {
			obj = map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "chat", "namespace": ns, "annotations": mergeAnn(objAnn, podAnn)}, "spec": spec}
		} else {
			obj = map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "chat", "namespace": ns, "annotations": objAnn},
				"spec": map[string]any{
					"selector": map[string]any{"matchLabels": map[string]any{"app": "chat"}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "chat"}, "annotations": podAnn}, "spec": spec},
				},
			}
		}
		out, d := p.admit(obj, "alice@example.com")
		if d == nil || !out.Checked {
			t.Fatalf("workload %d: not judged by the policies: %s %v", i, out.Decision, out.Denials)
		}
		rego, cel := lines(out.Warnings, "serving-readiness-probe"), lines(d.Warn, "serving-readiness-probe")
		_, profile := podAnn["modelgate.io/profile"]
		if _, own := objAnn["modelgate.io/profile"]; own {
			profile = true
		}
		if profile {
			// CEL cannot see the profile: it warns wherever Rego does,
			// and may warn where Rego does not.
			if len(rego) > 0 && len(cel) == 0 {
				t.Errorf("workload %d: Rego warns, the CEL form does not:\n%s\n%s", i, rego, mustJSON(t, obj))
			}
			continue
		}
		if diff := cmp.Diff(rego, cel); diff != "" {
			t.Errorf("workload %d: warnings (-Rego +CEL):\n%s\n%s", i, diff, mustJSON(t, obj))
		}
		for _, w := range rego {
			if strings.Contains(w, " serves a model ") {
				served++
			} else {
				all++
			}
		}
	}
	t.Logf("warned about the serving container: %d workloads; about every container: %d", served, all)
	if served < 100 || all < 50 {
		t.Errorf("the generated workloads exercise too little: %d and %d warnings", served, all)
	}
}

// mergeAnn is a Pod's annotations: the object's and the pod template's in
// one, the template's winning (a Pod has one metadata).
func mergeAnn(obj, pod map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		out[k] = v
	}
	for k, v := range pod {
		out[k] = v
	}
	return out
}
