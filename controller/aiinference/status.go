// Package aiinference is the AIInference controller: it writes a plain
// Deployment and Service for each AIInference, which modelgate's webhook
// decorates, and derives the AIInference's status from them. This file is
// the status, a pure function of what the controller observed and the
// time.
package aiinference

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// loaderContainer is the init container modelgate's webhook injects to
// fetch the model (mutators.ModelLoaderName; a test holds them equal).
const loaderContainer = "model-loader"

// Condition types.
const (
	// ConditionReady: at least one replica serves the model.
	ConditionReady = "Ready"
	// ConditionModelLoaded: a replica of the current revision has the
	// model (its loader succeeded).
	ConditionModelLoaded = "ModelLoaded"
	// ConditionProgressing: the current revision is rolling out, or done.
	ConditionProgressing = "Progressing"
)

// Reasons, on the conditions and as the status's cause.
const (
	ReasonServing            = "Serving"
	ReasonChildNotWritten    = "ChildNotWritten"
	ReasonNameConflict       = "NameConflict"
	ReasonPolicyDenied       = "PolicyDenied"
	ReasonCreating           = "Creating"
	ReasonScaledToZero       = "ScaledToZero"
	ReasonNoPods             = "WaitingForPods"
	ReasonUnschedulable      = "Unschedulable"
	ReasonLoading            = "LoadingModel"
	ReasonWarmingUp          = "WarmingUp"
	ReasonLoaderFailed       = "LoaderFailed"
	ReasonCrashLoop          = "CrashLoopBackOff"
	ReasonImagePull          = "ImagePullError"
	ReasonConfigError        = "ContainerConfigError"
	ReasonWarmupTimeout      = "WarmupTimeout"
	ReasonPodsNotCreated     = "PodsNotCreated"
	ReasonRolledOut          = "RolledOut"
	ReasonRollingOut         = "RollingOut"
	ReasonNewRevisionFailing = "NewRevisionFailing"
	ReasonLoaded             = "Loaded"
	ReasonNotLoaded          = "NotLoaded"
)

// ChildProblem is why the controller could not write a child: the status
// reports it as Failed.
type ChildProblem struct {
	// Reason is ReasonNameConflict, ReasonPolicyDenied or
	// ReasonChildNotWritten.
	Reason string
	// Message names the child and what the API server said.
	Message string
}

// Observed is what the status is derived from: the AIInference's
// Deployment (nil before it exists), its ReplicaSets and Pods (found by
// ownership and selector), and a problem writing a child.
type Observed struct {
	Deployment  *appsv1.Deployment
	ReplicaSets []appsv1.ReplicaSet
	Pods        []corev1.Pod
	Problem     *ChildProblem
}

// DefaultWarmupTimeout is the warm-up bound when the spec has none.
const DefaultWarmupTimeout = 300 * time.Second

// verdict is the phase and why, before it becomes conditions.
type verdict struct {
	phase   servingv1.Phase
	reason  string
	message string
	// recheck is when the verdict may change with no event (a warm-up
	// deadline); zero for never.
	recheck time.Time
}

// Status derives ai's status from what was observed at now. It keeps the
// transition times of conditions and phase that did not change. The
// returned time is when to derive it again if nothing else happens (a
// warm-up deadline), zero for never: the controller requeues then instead
// of polling.
func Status(ai *servingv1.AIInference, obs Observed, now time.Time) (servingv1.AIInferenceStatus, time.Time) {
	prev := ai.Status
	out := servingv1.AIInferenceStatus{
		ObservedGeneration: ai.Generation,
		Conditions:         slices.Clone(prev.Conditions),
		LastTransitionTime: prev.LastTransitionTime,
	}
	current := currentPods(obs)
	// A failure of the current revision: Failed, or, while an older one
	// still serves, Progressing False.
	failed, failing := podFailure(current, warmupTimeout(ai), now)
	v := phaseOf(ai, obs, current, failed, failing)
	out.Phase = v.phase
	if d := obs.Deployment; d != nil {
		out.ReadyReplicas = d.Status.ReadyReplicas
		// The scale subresource's status: an HPA finds the Pods by the
		// selector and compares their count with what it asked for.
		out.Replicas = d.Status.Replicas
		if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && d.Spec.Selector != nil {
			out.Selector = sel.String()
		}
	}
	out.ModelLoaded = modelLoaded(current)
	if out.Phase != prev.Phase || out.LastTransitionTime == nil {
		t := metav1.NewTime(now)
		out.LastTransitionTime = &t
	}

	set := func(typ string, ok bool, reason, message string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&out.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: message, ObservedGeneration: ai.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	set(ConditionReady, v.phase == servingv1.PhaseReady, v.reason, v.message)
	if out.ModelLoaded {
		set(ConditionModelLoaded, true, ReasonLoaded, "the model loader finished on a replica of the current revision")
	} else {
		reason, msg := ReasonNotLoaded, "no replica of the current revision has loaded the model yet"
		if v.phase == servingv1.PhaseFailed {
			reason, msg = v.reason, v.message
		}
		set(ConditionModelLoaded, false, reason, msg)
	}
	progressing, preason, pmsg := progress(obs, v, failed, failing)
	set(ConditionProgressing, progressing, preason, pmsg)
	return out, v.recheck
}

// phaseOf decides the phase: a child not written, then failures of the
// current revision, then serving, then how far the current revision got.
func phaseOf(ai *servingv1.AIInference, obs Observed, current []corev1.Pod, failed verdict, failing bool) verdict {
	if p := obs.Problem; p != nil {
		return verdict{phase: servingv1.PhaseFailed, reason: p.Reason, message: p.Message}
	}
	d := obs.Deployment
	if d == nil {
		return verdict{phase: servingv1.PhasePending, reason: ReasonCreating, message: "the Deployment is being created"}
	}
	if failing {
		if d.Status.ReadyReplicas > 0 {
			// The old revision still serves: Ready, and Progressing says
			// the new one fails.
			return verdict{phase: servingv1.PhaseReady, reason: ReasonServing,
				message: fmt.Sprintf("%d of %d replicas serve", d.Status.ReadyReplicas, desired(d))}
		}
		return failed
	}
	if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
		// The ReplicaSet could not create Pods: a policy denial or a quota.
		reason := ReasonPodsNotCreated
		if strings.Contains(c.Message, "denied the request") {
			reason = ReasonPolicyDenied
		}
		if d.Status.ReadyReplicas == 0 {
			return verdict{phase: servingv1.PhaseFailed, reason: reason, message: c.Message}
		}
	}
	if d.Status.ReadyReplicas > 0 {
		return verdict{phase: servingv1.PhaseReady, reason: ReasonServing,
			message: fmt.Sprintf("%d of %d replicas serve", d.Status.ReadyReplicas, desired(d))}
	}
	if desired(d) == 0 {
		return verdict{phase: servingv1.PhasePending, reason: ReasonScaledToZero, message: "scaled to zero replicas"}
	}
	if len(current) == 0 {
		return verdict{phase: servingv1.PhasePending, reason: ReasonNoPods, message: "no Pod of the current revision exists yet"}
	}
	// The pod furthest along decides: warming up, then loading, then
	// unschedulable.
	var loading, unschedulable *verdict
	for i := range current {
		p := &current[i]
		if start, ok := warmingSince(p); ok {
			deadline := start.Add(warmupTimeout(ai))
			return verdict{phase: servingv1.PhaseLoading, reason: ReasonWarmingUp, recheck: deadline,
				message: fmt.Sprintf("Pod %s loaded the model and is warming up (until %s at the latest)", p.Name, deadline.UTC().Format(time.RFC3339))}
		}
		if scheduled(p) && loading == nil {
			loading = &verdict{phase: servingv1.PhaseLoading, reason: ReasonLoading, message: fmt.Sprintf("Pod %s is loading the model", p.Name)}
		}
		if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && unschedulable == nil {
			unschedulable = &verdict{phase: servingv1.PhasePending, reason: ReasonUnschedulable,
				message: fmt.Sprintf("Pod %s cannot be scheduled: %s", p.Name, c.Message)}
		}
	}
	switch {
	case loading != nil:
		return *loading
	case unschedulable != nil:
		return *unschedulable
	}
	return verdict{phase: servingv1.PhasePending, reason: ReasonNoPods, message: "waiting for a Pod to be scheduled"}
}

// podFailure finds a failure of the current revision: the loader exiting
// non-zero, a container crash-looping, an image that cannot be pulled, a
// container that cannot be configured (a missing Secret), or a warm-up
// over its bound.
func podFailure(pods []corev1.Pod, warmup time.Duration, now time.Time) (verdict, bool) {
	for i := range pods {
		p := &pods[i]
		statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
		for j := range statuses {
			cs := &statuses[j]
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "CrashLoopBackOff":
					reason := ReasonCrashLoop
					if cs.Name == loaderContainer {
						reason = ReasonLoaderFailed
					}
					return failure(reason, p, cs, "is crash-looping"+lastWords(cs.LastTerminationState.Terminated)), true
				case "ErrImagePull", "ImagePullBackOff", "InvalidImageName":
					return failure(ReasonImagePull, p, cs, fmt.Sprintf("cannot pull its image %s: %s", cs.Image, w.Message)), true
				case "CreateContainerConfigError", "CreateContainerError":
					return failure(ReasonConfigError, p, cs, "cannot be created: "+w.Message), true
				}
			}
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && cs.Name == loaderContainer {
				return failure(ReasonLoaderFailed, p, cs, fmt.Sprintf("exited with code %d%s", t.ExitCode, lastWords(t))), true
			}
		}
		if start, ok := warmingSince(p); ok && warmup > 0 && !now.Before(start.Add(warmup)) {
			return verdict{phase: servingv1.PhaseFailed, reason: ReasonWarmupTimeout,
				message: fmt.Sprintf("Pod %s has not become ready within the warm-up timeout of %s after its containers started", p.Name, warmup)}, true
		}
	}
	return verdict{}, false
}

// failure is a Failed verdict about one container of one Pod.
func failure(reason string, p *corev1.Pod, cs *corev1.ContainerStatus, what string) verdict {
	return verdict{phase: servingv1.PhaseFailed, reason: reason, message: fmt.Sprintf("Pod %s: container %s %s", p.Name, cs.Name, what)}
}

// lastWords is a terminated container's message (its termination message,
// else the kubelet's reason), for a failure message.
func lastWords(t *corev1.ContainerStateTerminated) string {
	if t == nil {
		return ""
	}
	msg := strings.TrimSpace(t.Message)
	if msg == "" {
		msg = t.Reason
	}
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	if msg == "" {
		return fmt.Sprintf(" (last exit code %d)", t.ExitCode)
	}
	return fmt.Sprintf(" (last exit code %d: %s)", t.ExitCode, msg)
}

// warmingSince reports that every init container is done and a container
// runs but the Pod is not ready, and since when its containers run.
func warmingSince(p *corev1.Pod) (time.Time, bool) {
	if c := podCondition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		return time.Time{}, false
	}
	if c := podCondition(p, corev1.PodInitialized); c == nil || c.Status != corev1.ConditionTrue {
		return time.Time{}, false
	}
	var started time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if r := cs.State.Running; r != nil && (started.IsZero() || r.StartedAt.After(started)) {
			started = r.StartedAt.Time
		}
	}
	return started, !started.IsZero()
}

// modelLoaded reports that a current Pod's loader succeeded, or that a
// current Pod is ready (a model that needs no loader).
func modelLoaded(pods []corev1.Pod) bool {
	for i := range pods {
		p := &pods[i]
		if c := podCondition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
			return true
		}
		for _, cs := range p.Status.InitContainerStatuses {
			if t := cs.State.Terminated; cs.Name == loaderContainer && t != nil && t.ExitCode == 0 {
				return true
			}
		}
	}
	return false
}

// progress is the Progressing condition: rolling out, rolled out, or the
// current revision failing while an older one serves.
func progress(obs Observed, v, failed verdict, failing bool) (bool, string, string) {
	if v.phase == servingv1.PhaseFailed {
		return false, v.reason, v.message
	}
	d := obs.Deployment
	if d == nil {
		return true, ReasonCreating, "the Deployment is being created"
	}
	if failing {
		return false, ReasonNewRevisionFailing, failed.message
	}
	want := desired(d)
	if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.Replicas == want && d.Status.AvailableReplicas == want {
		return true, ReasonRolledOut, fmt.Sprintf("%d of %d replicas run the current revision", d.Status.UpdatedReplicas, want)
	}
	return true, ReasonRollingOut, fmt.Sprintf("%d of %d replicas updated, %d available", d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas)
}

// currentPods are the Pods of the Deployment's newest ReplicaSet (the one
// whose revision annotation matches the Deployment's), or all of them when
// that ReplicaSet is not known yet, among the Pods a ReplicaSet of the
// Deployment controls. Pods being deleted are left out.
func currentPods(obs Observed) []corev1.Pod {
	// Only the Pods a ReplicaSet of the Deployment controls count: anyone
	// who may create Pods in the namespace can label one like ours.
	owned := map[types.UID]bool{}
	var current types.UID
	rev := ""
	if d := obs.Deployment; d != nil {
		rev = d.Annotations[revisionAnnotation]
	}
	for i := range obs.ReplicaSets {
		rs := &obs.ReplicaSets[i]
		owned[rs.UID] = true
		if rev != "" && rs.Annotations[revisionAnnotation] == rev {
			current = rs.UID
		}
	}
	var out []corev1.Pod
	for _, p := range obs.Pods {
		ref := metav1.GetControllerOf(&p)
		if p.DeletionTimestamp != nil || ref == nil || !owned[ref.UID] {
			continue
		}
		if current == "" || ref.UID == current {
			out = append(out, p)
		}
	}
	return out
}

// revisionAnnotation is the Deployment controller's revision number, on
// the Deployment and its ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

func warmupTimeout(ai *servingv1.AIInference) time.Duration {
	if w := ai.Spec.Warmup; w != nil && w.TimeoutSeconds > 0 {
		return time.Duration(w.TimeoutSeconds) * time.Second
	}
	return DefaultWarmupTimeout
}

func desired(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func scheduled(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodScheduled)
	return c != nil && c.Status == corev1.ConditionTrue
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}
