package integration_test

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/modelgate/modelgate/mutators"
)

// How published_test.go compares an object as its authors wrote it with
// the same object as modelgate injected it.

// fieldPath is where a field is in an object: map keys, and list elements
// as [key=value] (or [i] in a list without a key).
type fieldPath []string

func (p fieldPath) String() string { return strings.Join(p, ".") }

// with returns a new path with the segment appended (never sharing p's
// array).
func (p fieldPath) with(s string) fieldPath { return append(slices.Clip(p), s) }

// comparedFields is what authoredDiff compares of a workload: its spec,
// and its labels and annotations (the rest of metadata is the API
// server's: uid, resourceVersion, timestamps).
func comparedFields(obj runtime.Object) map[string]any {
	GinkgoHelper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	meta, _ := u["metadata"].(map[string]any)
	out := map[string]any{"spec": u["spec"], "metadata": map[string]any{}}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok := meta[k]; ok {
			out["metadata"].(map[string]any)[k] = v
		}
	}
	return out
}

// authoredDiff compares the fields of base (the object as stored without
// modelgate) with got (as stored with it). changed are the fields base
// holds that got lacks or holds with another value: something the authors
// wrote was overridden or removed. added are the fields got holds that
// base lacks. A list of plain values (command, args) is one value; a list
// of objects is compared element by element, matched by its key (see
// listKey), or, without a key, each of base's elements must be in got as
// it is.
func authoredDiff(base, got any, at fieldPath) (changed, added []fieldPath) {
	switch b := base.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []fieldPath{at}, nil
		}
		for _, k := range sortedKeys(b) {
			gv, ok := g[k]
			if !ok {
				changed = append(changed, at.with(k))
				continue
			}
			c, a := authoredDiff(b[k], gv, at.with(k))
			changed, added = append(changed, c...), append(added, a...)
		}
		for _, k := range sortedKeys(g) {
			if _, ok := b[k]; !ok {
				added = append(added, addedFields(at.with(k), g[k])...)
			}
		}
		return changed, added
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []fieldPath{at}, nil
		}
		if key := listKey(at, b, g); key != nil {
			byKey := map[string]any{}
			for _, e := range g {
				byKey[key(e)] = e
			}
			authored := map[string]bool{}
			for _, e := range b {
				k := key(e)
				authored[k] = true
				seg := "[" + k + "]"
				ge, ok := byKey[k]
				if !ok {
					changed = append(changed, at.with(seg))
					continue
				}
				c, a := authoredDiff(e, ge, at.with(seg))
				changed, added = append(changed, c...), append(added, a...)
			}
			for _, e := range g {
				if k := key(e); !authored[k] {
					added = append(added, at.with("["+k+"]"))
				}
			}
			return changed, added
		}
		if !slices.ContainsFunc(b, isObject) && !slices.ContainsFunc(g, isObject) {
			if !reflect.DeepEqual(b, g) {
				changed = append(changed, at)
			}
			return changed, nil
		}
		used := make([]bool, len(g))
		for i, e := range b {
			j := -1
			for k, ge := range g {
				if !used[k] && reflect.DeepEqual(e, ge) {
					j = k
					break
				}
			}
			if j < 0 {
				changed = append(changed, at.with("["+strconv.Itoa(i)+"]"))
				continue
			}
			used[j] = true
		}
		for j, u := range used {
			if !u {
				added = append(added, at.with("[+"+strconv.Itoa(j)+"]"))
			}
		}
		return changed, added
	default:
		if !reflect.DeepEqual(base, got) {
			changed = append(changed, at)
		}
		return changed, nil
	}
}

// addedFields names a field base lacks: the field, or, for a map of
// labels or annotations, each key, and for a list with a key (see
// listKey), each element, so that each is judged on its own.
func addedFields(at fieldPath, v any) []fieldPath {
	var out []fieldPath
	switch v := v.(type) {
	case map[string]any:
		if last := at[len(at)-1]; last != "labels" && last != "annotations" {
			break
		}
		for _, k := range sortedKeys(v) {
			out = append(out, at.with(k))
		}
		return out
	case []any:
		key := listKey(at, v)
		if key == nil {
			break
		}
		for _, e := range v {
			out = append(out, at.with("["+key(e)+"]"))
		}
		return out
	}
	return []fieldPath{at}
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listKey returns what identifies an element of the list of objects at the
// path, or nil when nothing does: a port is its number and protocol, a
// volume mount its volume and path, anything else its name when every
// element of the lists has one; and no two elements of a list share a key.
func listKey(at fieldPath, lists ...[]any) func(any) string {
	fields := []string{"name"}
	switch at[len(at)-1] {
	case "ports":
		fields = []string{"containerPort", "protocol"}
	case "volumeMounts":
		fields = []string{"name", "mountPath"}
	}
	key := func(e any) string {
		m, _ := e.(map[string]any)
		parts := make([]string, len(fields))
		for i, f := range fields {
			parts[i] = fmt.Sprintf("%s=%v", f, m[f])
		}
		return strings.Join(parts, ",")
	}
	for _, l := range lists {
		seen := map[string]bool{}
		for _, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				return nil
			}
			for _, f := range fields {
				if _, ok := m[f]; !ok {
					return nil
				}
			}
			k := key(e)
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
	}
	return key
}

// ownedAddition reports whether a field modelgate added is its own: a
// modelgate.io/ label or annotation, or a part its record owns (see
// mutators/parts.go): a volume, init container, affinity, toleration or
// claim of the pod, or, in the serving container only, a probe, variable,
// volume mount, port, resource or claim.
func ownedAddition(p fieldPath, r mutators.Record, serving string) bool {
	ownsPrefix := func(prefix string) bool {
		return slices.ContainsFunc(r.Owns, func(o string) bool { return strings.HasPrefix(o, prefix) })
	}
	s := p.String()
	switch {
	case len(p) == 3 && p[0] == "metadata" && (p[1] == "labels" || p[1] == "annotations"):
		return isModelgateKey(p[2])
	case strings.HasPrefix(s, "spec.template.metadata.labels.") || strings.HasPrefix(s, "spec.template.metadata.annotations."):
		return len(p) == 5 && isModelgateKey(p[4])
	case !strings.HasPrefix(s, "spec.template.spec.") || len(p) < 4:
		return false
	}
	switch p[3] {
	case "containers":
		return len(p) > 5 && keyField(p[4], "name") == serving && ownedInContainer(p[5:], serving, r.Owned, ownsPrefix)
	case "initContainers":
		return len(p) == 5 && r.Owned("initContainer/"+keyField(p[4], "name"))
	case "volumes":
		return len(p) == 5 && r.Owned("volume/"+keyField(p[4], "name"))
	case "affinity":
		return ownsPrefix("nodeAffinity/")
	case "tolerations":
		return ownsPrefix("toleration/")
	case "resourceClaims":
		return ownsPrefix("resourceClaim/")
	}
	return false
}

// ownedInContainer reports whether the field p of container c is a part
// the record owns.
func ownedInContainer(p fieldPath, c string, owned, ownsPrefix func(string) bool) bool {
	switch p[0] {
	case "readinessProbe", "startupProbe":
		return owned(p[0] + "/" + c)
	case "env":
		return len(p) == 2 && ownsPrefix("env/"+c+"/"+keyField(p[1], "name")+"=")
	case "volumeMounts":
		return len(p) == 2 && owned("volumeMount/"+c+"/"+keyField(p[1], "name"))
	case "ports":
		return len(p) == 2 && ownsPrefix("containerPort/"+c+"/"+keyField(p[1], "containerPort")+"/")
	case "resources":
		switch {
		case len(p) == 1:
			return ownsPrefix("limits/"+c+"/") || ownsPrefix("requests/"+c+"/") || ownsPrefix("claim/"+c+"/")
		case p[1] == "claims":
			return ownsPrefix("claim/" + c + "/")
		case p[1] == "limits" || p[1] == "requests":
			if len(p) == 2 {
				return ownsPrefix(p[1] + "/" + c + "/")
			}
			return ownsPrefix(p[1] + "/" + c + "/" + p[2] + "=")
		}
	}
	return false
}

// keyField is a field of a list element's segment: "x" for "name" in
// [name=x] or [name=x,mountPath=/y].
func keyField(seg, field string) string {
	for _, kv := range strings.Split(strings.Trim(seg, "[]"), ",") {
		if k, v, _ := strings.Cut(kv, "="); k == field {
			return v
		}
	}
	return ""
}
