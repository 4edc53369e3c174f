package workload

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// DatedClaimResolver is a ClaimResolver that also knows when the template
// or ResourceClaim it finds was created (its metadata.creationTimestamp):
// the webhook's cache.
type DatedClaimResolver interface {
	ClaimResolver
	// DatedClaimSpec is ClaimSpec with the time the template or claim was
	// created.
	DatedClaimSpec(namespace string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, time.Time, bool)
}

// CreatedBefore is r knowing only the templates and claims created before
// t: those a Pod created at t was admitted with, to judge the old Pod of an
// UPDATE. Templates and claims are immutable, so one created at t or later
// (deleted and created again with another spec, perhaps) is one the Pod's
// admission never saw. Creation times have a resolution of one second: one
// created in the same second as the Pod counts as later. A resolver that
// cannot tell when they were created (nil, or not a DatedClaimResolver)
// knows none, and neither does any resolver for a zero t.
//
// A view built with it reads a claim it does not know as asking for
// nothing, rather than as unresolved: whatever that claim gives now (more
// GPUs, allocationMode All, or not being found at all) is then never a
// violation the old Pod had, and ratcheting cannot lift it. modelgate's own
// template, made after the Pod, is still known from the Pod's sealed
// injection record, which says what the Pod was admitted asking for.
func CreatedBefore(r ClaimResolver, t time.Time) ClaimResolver {
	dated, _ := r.(DatedClaimResolver)
	return createdBefore{r: dated, t: t}
}

type createdBefore struct {
	r DatedClaimResolver
	t time.Time
}

// ClaimSpec implements ClaimResolver.
func (c createdBefore) ClaimSpec(namespace string, pc corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool) {
	if c.r == nil || c.t.IsZero() {
		return nil, false
	}
	spec, created, ok := c.r.DatedClaimSpec(namespace, pc)
	if !ok || created.IsZero() || !created.Before(c.t) {
		return nil, false
	}
	return spec, true
}
