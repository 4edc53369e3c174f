package mutators

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Parts are the pieces of a pod spec modelgate creates, named in the
// Injected record (Record.Owns) so that a later pass updates or removes
// them and never mistakes a piece the user wrote for its own. A part's name
// is its kind, then, for the parts that live in a container, the
// container's name, then what identifies it within the kind:
//
//	initContainer/model-loader
//	volume/model-store
//	volumeMount/<container>/model-store
//	limits/<container>/<resource>=<count>
//	requests/<container>/<resource>=<count>
//	nodeAffinity/<operator>/<label key>
//	toleration/<effect>/<taint key>
//	readinessProbe/<container>
//	startupProbe/<container>
//	containerPort/<container>/<port>/<name>
//	env/<container>/<name>=<value>
//	resourceClaim/<claim>=<template>
//	claim/<container>/<claim>
//	label/<key>
//
// Container names and operators hold no '/', so the fields before the last
// split cleanly; resource names, label keys and environment values may
// hold '/' and come last (a resource or variable name holds no '=').

// The part kinds.
const (
	partInitContainer  = "initContainer"
	partVolume         = "volume"
	partVolumeMount    = "volumeMount"
	partLimits         = "limits"
	partRequests       = "requests"
	partNodeAffinity   = "nodeAffinity"
	partToleration     = "toleration"
	partReadinessProbe = "readinessProbe"
	partStartupProbe   = "startupProbe"
	partContainerPort  = "containerPort"
	partEnv            = "env"
)

// containerParts are the kinds whose second field names a container.
var containerParts = []string{
	partVolumeMount, partLimits, partRequests, partReadinessProbe, partStartupProbe, partContainerPort, partEnv, partClaim,
}

// part joins a part's fields.
func part(kind string, fields ...string) string {
	return kind + "/" + strings.Join(fields, "/")
}

// ownedOf returns, for every part of the kind the record owns, the rest of
// its name after "<kind>/".
func (r Record) ownedOf(kind string) []string {
	var out []string
	for _, p := range r.Owns {
		if rest, ok := strings.CutPrefix(p, kind+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

// Containers returns the names of the containers that hold a part the
// record owns, each once, in record order.
func (r Record) Containers() []string {
	var out []string
	for _, p := range r.Owns {
		kind, rest, _ := strings.Cut(p, "/")
		if !slices.Contains(containerParts, kind) {
			continue
		}
		name, _, _ := strings.Cut(rest, "/")
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// containerNamed returns the app container with the name, or nil.
func containerNamed(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}
