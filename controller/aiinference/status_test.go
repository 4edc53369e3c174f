package aiinference

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/mutators"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func TestLoaderContainerIsTheInjectedOne(t *testing.T) {
	if loaderContainer != mutators.ModelLoaderName {
		t.Errorf("loaderContainer %q, the webhook injects %q", loaderContainer, mutators.ModelLoaderName)
	}
}

// pod is a Pod of revision hash with the given conditions and container
// states.
type podOpt func(*corev1.Pod)

// pod is a Pod of the ReplicaSet of the hash ("old" or "new"), which
// controls it.
func pod(name, hash string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: hash},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llama-" + hash,
			UID: types.UID("uid-" + hash), Controller: ptr.To(true)}}}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, msg string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Message: msg})
	}
}

// loaderState sets the status of the model-loader init container.
func loaderState(st corev1.ContainerState, last *corev1.ContainerStateTerminated) podOpt {
	return func(p *corev1.Pod) {
		cs := corev1.ContainerStatus{Name: loaderContainer, State: st, Image: "ghcr.io/modelgate/modelgate:v1"}
		if last != nil {
			cs.LastTerminationState.Terminated = last
		}
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, cs)
	}
}

// serverState sets the status of the serving container, "server".
func serverState(st corev1.ContainerState) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "server", State: st, Image: "vllm/vllm-openai:v0.6.3"})
	}
}

var (
	scheduledOK   = cond(corev1.PodScheduled, corev1.ConditionTrue, "")
	initialized   = cond(corev1.PodInitialized, corev1.ConditionTrue, "")
	notReady      = cond(corev1.PodReady, corev1.ConditionFalse, "")
	ready         = cond(corev1.PodReady, corev1.ConditionTrue, "")
	loaderRunning = loaderState(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, nil)
	loaderDone    = loaderState(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}, nil)
)

func waiting(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func runningSince(t time.Time) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t)}}
}

// deployment is the AIInference's Deployment at revision 2 (hash "new"),
// wanting replicas, with ready of them ready.
func deployment(replicas, ready int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Generation: 3, Annotations: map[string]string{revisionAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"serving.modelgate.io/inference": "llama"}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: ready, AvailableReplicas: ready, Conditions: conds},
	}
}

// replicaSets are the old (revision 1, hash "old") and new (2, "new") ones.
var replicaSets = []appsv1.ReplicaSet{
	{ObjectMeta: metav1.ObjectMeta{Name: "llama-old", UID: "uid-old", Annotations: map[string]string{revisionAnnotation: "1"},
		Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "old"}}},
	{ObjectMeta: metav1.ObjectMeta{Name: "llama-new", UID: "uid-new", Annotations: map[string]string{revisionAnnotation: "2"},
		Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "new"}}},
}

func inference() *servingv1.AIInference {
	return &servingv1.AIInference{
		ObjectMeta: metav1.ObjectMeta{Name: "llama", Namespace: "team-a", Generation: 7},
		Spec:       servingv1.AIInferenceSpec{Warmup: &servingv1.WarmupSpec{TimeoutSeconds: 600}},
	}
}

func TestStatus(t *testing.T) {
	now := t0.Add(time.Hour)
	for name, tc := range map[string]struct {
		obs         Observed
		phase       servingv1.Phase
		reason      string
		message     string // a part of the Ready condition's message
		loaded      bool
		progressing metav1.ConditionStatus
		recheck     time.Time
	}{
		"no Deployment yet": {
			obs: Observed{}, phase: servingv1.PhasePending, reason: ReasonCreating, progressing: metav1.ConditionTrue,
		},
		"a name conflict": {
			obs:   Observed{Problem: &ChildProblem{Reason: ReasonNameConflict, Message: "Deployment team-a/llama exists and is not controlled by this AIInference"}},
			phase: servingv1.PhaseFailed, reason: ReasonNameConflict, message: "not controlled by", progressing: metav1.ConditionFalse,
		},
		"the Deployment denied by a policy": {
			obs:   Observed{Problem: &ChildProblem{Reason: ReasonPolicyDenied, Message: `admission webhook "workload.validate.modelgate.io" denied the request: max-gpus-per-pod: 16 GPUs, at most 8`}},
			phase: servingv1.PhaseFailed, reason: ReasonPolicyDenied, message: "max-gpus-per-pod", progressing: metav1.ConditionFalse,
		},
		"Pods denied by a policy (the ReplicaSet cannot create them)": {
			obs: Observed{Deployment: deployment(1, 0, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
				Reason: "FailedCreate", Message: `pods "llama-new-x" is forbidden: admission webhook "workload.validate.modelgate.io" denied the request: no-privileged-gpu`}),
				ReplicaSets: replicaSets},
			phase: servingv1.PhaseFailed, reason: ReasonPolicyDenied, message: "no-privileged-gpu", progressing: metav1.ConditionFalse,
		},
		"unschedulable": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", cond(corev1.PodScheduled, corev1.ConditionFalse, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."))}},
			phase: servingv1.PhasePending, reason: ReasonUnschedulable, message: "Insufficient nvidia.com/gpu", progressing: metav1.ConditionTrue,
		},
		"no Pod yet": {
			obs:   Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets},
			phase: servingv1.PhasePending, reason: ReasonNoPods, progressing: metav1.ConditionTrue,
		},
		"the loader running": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, loaderRunning, serverState(waiting("PodInitializing", "")))}},
			phase: servingv1.PhaseLoading, reason: ReasonLoading, message: "loading the model", progressing: metav1.ConditionTrue,
		},
		"the loader failed": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, loaderState(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 3, Reason: "Error", Message: "hf://org/model: 401 Unauthorized: the token cannot read this repository"}}, nil))}},
			phase: servingv1.PhaseFailed, reason: ReasonLoaderFailed, message: "exited with code 3 (last exit code 3: hf://org/model: 401", progressing: metav1.ConditionFalse,
		},
		// Anyone who may create Pods in the namespace can label one like
		// the Deployment's: only a Pod its ReplicaSet controls counts.
		"a Pod labelled like ours but not the ReplicaSet's": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, loaderRunning, serverState(waiting("PodInitializing", ""))),
				func() corev1.Pod {
					p := pod("forged", "new", scheduledOK, loaderState(waiting("CrashLoopBackOff", "back-off 40s"),
						&corev1.ContainerStateTerminated{ExitCode: 1, Message: "made up"}))
					p.OwnerReferences = nil
					return p
				}()}},
			phase: servingv1.PhaseLoading, reason: ReasonLoading, message: "llama-new-a is loading the model", progressing: metav1.ConditionTrue,
		},
		"the loader crash-looping": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, loaderState(waiting("CrashLoopBackOff", "back-off 40s"),
					&corev1.ContainerStateTerminated{ExitCode: 1, Message: "s3://bucket/model: no such key"}))}},
			phase: servingv1.PhaseFailed, reason: ReasonLoaderFailed, message: "crash-looping (last exit code 1: s3://bucket/model: no such key)", progressing: metav1.ConditionFalse,
		},
		"the engine crash-looping": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, initialized, loaderDone, serverState(waiting("CrashLoopBackOff", "")))}},
			phase: servingv1.PhaseFailed, reason: ReasonCrashLoop, message: "container server is crash-looping", loaded: true, progressing: metav1.ConditionFalse,
		},
		"a missing credentials Secret": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, loaderState(waiting("CreateContainerConfigError", `secret "hf-token" not found`), nil))}},
			phase: servingv1.PhaseFailed, reason: ReasonConfigError, message: `secret "hf-token" not found`, progressing: metav1.ConditionFalse,
		},
		"an image that cannot be pulled": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, initialized, loaderDone, serverState(waiting("ImagePullBackOff", "Back-off pulling image")))}},
			phase: servingv1.PhaseFailed, reason: ReasonImagePull, message: "cannot pull its image vllm/vllm-openai:v0.6.3", loaded: true, progressing: metav1.ConditionFalse,
		},
		"warming up": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, initialized, notReady, loaderDone, serverState(runningSince(now.Add(-time.Minute))))}},
			phase: servingv1.PhaseLoading, reason: ReasonWarmingUp, message: "warming up", loaded: true, progressing: metav1.ConditionTrue,
			recheck: now.Add(-time.Minute).Add(10 * time.Minute),
		},
		"the warm-up timeout exceeded": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, initialized, notReady, loaderDone, serverState(runningSince(now.Add(-11*time.Minute))))}},
			phase: servingv1.PhaseFailed, reason: ReasonWarmupTimeout, message: "warm-up timeout of 10m0s", loaded: true, progressing: metav1.ConditionFalse,
		},
		"ready": {
			obs: Observed{Deployment: deployment(2, 2), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-new-a", "new", scheduledOK, initialized, ready, loaderDone, serverState(runningSince(t0))),
				pod("llama-new-b", "new", scheduledOK, initialized, ready, loaderDone, serverState(runningSince(t0)))}},
			phase: servingv1.PhaseReady, reason: ReasonServing, message: "2 of 2 replicas serve", loaded: true, progressing: metav1.ConditionTrue,
		},
		"a new revision failing while the old serves": {
			obs: Observed{Deployment: deployment(1, 1), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-old-a", "old", scheduledOK, initialized, ready, loaderDone, serverState(runningSince(t0))),
				pod("llama-new-a", "new", scheduledOK, loaderState(waiting("CrashLoopBackOff", ""), &corev1.ContainerStateTerminated{ExitCode: 2}))}},
			phase: servingv1.PhaseReady, reason: ReasonServing, message: "1 of 1 replicas serve", progressing: metav1.ConditionFalse,
		},
		"an old revision's failure does not count": {
			obs: Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{
				pod("llama-old-a", "old", scheduledOK, loaderState(waiting("CrashLoopBackOff", ""), nil)),
				pod("llama-new-a", "new", scheduledOK, loaderRunning)}},
			phase: servingv1.PhaseLoading, reason: ReasonLoading, progressing: metav1.ConditionTrue,
		},
		"scaled to zero": {
			obs:   Observed{Deployment: deployment(0, 0), ReplicaSets: replicaSets},
			phase: servingv1.PhasePending, reason: ReasonScaledToZero, progressing: metav1.ConditionTrue,
		},
	} {
		t.Run(name, func(t *testing.T) {
			ai := inference()
			st, recheck := Status(ai, tc.obs, now)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			if st.ObservedGeneration != 7 {
				t.Errorf("observedGeneration %d, want 7", st.ObservedGeneration)
			}
			readyCond := meta.FindStatusCondition(st.Conditions, ConditionReady)
			if readyCond == nil {
				t.Fatal("no Ready condition")
			}
			if readyCond.Reason != tc.reason || !strings.Contains(readyCond.Message, tc.message) {
				t.Errorf("Ready: reason %s message %q; want reason %s, a message with %q", readyCond.Reason, readyCond.Message, tc.reason, tc.message)
			}
			if want := tc.phase == servingv1.PhaseReady; (readyCond.Status == metav1.ConditionTrue) != want {
				t.Errorf("Ready status %s in phase %s", readyCond.Status, st.Phase)
			}
			if st.ModelLoaded != tc.loaded {
				t.Errorf("modelLoaded %v, want %v", st.ModelLoaded, tc.loaded)
			}
			if c := meta.FindStatusCondition(st.Conditions, ConditionProgressing); c == nil || c.Status != tc.progressing {
				t.Errorf("Progressing %+v, want status %s", c, tc.progressing)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 7 {
					t.Errorf("condition %s stamped with generation %d, want 7", c.Type, c.ObservedGeneration)
				}
			}
			if d := tc.obs.Deployment; d != nil {
				if st.Replicas != d.Status.Replicas || st.Selector != "serving.modelgate.io/inference=llama" {
					t.Errorf("scale status: replicas %d selector %q; want %d and the Deployment's selector", st.Replicas, st.Selector, d.Status.Replicas)
				}
			} else if st.Replicas != 0 || st.Selector != "" {
				t.Errorf("scale status without a Deployment: replicas %d selector %q", st.Replicas, st.Selector)
			}
			if !recheck.Equal(tc.recheck) {
				t.Errorf("recheck at %s, want %s", recheck, tc.recheck)
			}
		})
	}
}

// TestStatusKeepsTransitionTimes checks that deriving again with nothing
// changed yields the same status (no write), and that a phase change moves
// only what changed.
func TestStatusKeepsTransitionTimes(t *testing.T) {
	ai := inference()
	loading := Observed{Deployment: deployment(1, 0), ReplicaSets: replicaSets, Pods: []corev1.Pod{pod("llama-new-a", "new", scheduledOK, loaderRunning)}}
	st, _ := Status(ai, loading, t0)
	ai.Status = st
	again, _ := Status(ai, loading, t0.Add(time.Minute))
	if !equalStatus(st, again) {
		t.Errorf("the same observation a minute later changed the status:\n%+v\n%+v", st, again)
	}
	ai.Status = again
	readyObs := Observed{Deployment: deployment(1, 1), ReplicaSets: replicaSets, Pods: []corev1.Pod{
		pod("llama-new-a", "new", scheduledOK, initialized, ready, loaderDone, serverState(runningSince(t0)))}}
	later := t0.Add(2 * time.Minute)
	rd, _ := Status(ai, readyObs, later)
	if rd.Phase != servingv1.PhaseReady || !rd.LastTransitionTime.Time.Equal(later) {
		t.Errorf("phase %s changed at %v, want Ready at %v", rd.Phase, rd.LastTransitionTime, later)
	}
	if c := meta.FindStatusCondition(rd.Conditions, ConditionProgressing); !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Progressing stayed True but its transition time moved to %v", c.LastTransitionTime)
	}
}

func equalStatus(a, b servingv1.AIInferenceStatus) bool {
	if a.Phase != b.Phase || a.ModelLoaded != b.ModelLoaded || a.ReadyReplicas != b.ReadyReplicas ||
		!a.LastTransitionTime.Equal(b.LastTransitionTime) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || !x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	return true
}
