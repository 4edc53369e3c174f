package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSchedule(t *testing.T) {
	var got []string
	for _, p := range schedule(2) {
		got = append(got, p.label()+" in "+p.namespace())
	}
	want := []string{
		"r1 without in bench-r1-without", "r1 with in bench-r1-with",
		"r2 without in bench-r2-without", "r2 with in bench-r2-with",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schedule(2) (-want +got):\n%s", diff)
	}
}

func pod(uid, node string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestPodTracker(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	tr := newPodTracker(2)
	tr.begin(start)

	tr.observe(pod("a", "", corev1.PodPending), at(10))
	tr.observe(pod("a", "", corev1.PodPending), at(11)) // an update changing nothing
	tr.observe(pod("b", "", corev1.PodPending), at(20))
	tr.observe(pod("a", "n1", corev1.PodPending), at(30))
	tr.observe(pod("a", "n1", corev1.PodRunning), at(40))
	select {
	case <-tr.done:
		t.Fatalf("done with one pod of two Running")
	default:
	}
	// b is seen bound and Running at once (a missed update).
	tr.observe(pod("b", "n2", corev1.PodRunning), at(50))
	tr.observe(pod("b", "n2", corev1.PodRunning), at(60))
	select {
	case <-tr.done:
	default:
		t.Fatalf("not done with both pods Running")
	}
	if diff := cmp.Diff([milestones]int{2, 2, 2}, tr.progress()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	want := [milestones]time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	if diff := cmp.Diff(want, tr.times()); diff != "" {
		t.Errorf("times (-want +got):\n%s", diff)
	}
	if got, want := tr.describe(), "2/2 pods created, 2 scheduled, 2 Running"; got != want {
		t.Errorf("describe() = %q, want %q", got, want)
	}
}
