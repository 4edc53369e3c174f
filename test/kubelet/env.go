package kubelet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// envVar is one variable of a container's environment, as the container
// sees it (before path translation).
type envVar struct{ Name, Value string }

// containerEnv builds a container's environment as the kubelet does
// (makeEnvironmentVariables, Kubernetes 1.36):
//
//  1. envFrom, in order: every key of the Secret or ConfigMap (with the
//     prefix), a later source replacing an earlier one's variable. A
//     missing source is an error unless optional. Every key is taken:
//     since RelaxedEnvironmentVariableValidation (GA in 1.34) the kubelet
//     no longer skips keys that are not C identifiers (tls.crt, 1st,
//     my-key), which earlier kubelets dropped with an event.
//  2. env, in order, each replacing a variable of the same name: a value
//     has its $(VAR) references expanded from the variables defined so
//     far (envFrom's and earlier env's; an unknown one stays as written);
//     valueFrom is resolved (a missing optional Secret, ConfigMap or key
//     leaves the variable out).
//
// The kubelet collects the result in a map, so its order is unspecified;
// here a variable keeps the position it was first defined at.
func containerEnv(ctx context.Context, c client.Reader, pod *corev1.Pod, ctr *corev1.Container) ([]envVar, error) {
	var (
		out        []envVar
		secrets    = map[string]*corev1.Secret{}
		configMaps = map[string]*corev1.ConfigMap{}
	)
	set := func(name, value string) {
		if i := slices.IndexFunc(out, func(v envVar) bool { return v.Name == name }); i >= 0 {
			out[i].Value = value
			return
		}
		out = append(out, envVar{name, value})
	}
	getSecret := func(name string) (*corev1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, s); err != nil {
			return nil, err
		}
		secrets[name] = s
		return s, nil
	}
	getConfigMap := func(name string) (*corev1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, cm); err != nil {
			return nil, err
		}
		configMaps[name] = cm
		return cm, nil
	}

	for _, from := range ctr.EnvFrom {
		switch {
		case from.SecretRef != nil:
			s, err := getSecret(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom secret %q: %w", from.SecretRef.Name, err)
			}
			for _, k := range sortedKeys(s.Data) {
				set(from.Prefix+k, string(s.Data[k]))
			}
		case from.ConfigMapRef != nil:
			cm, err := getConfigMap(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom configMap %q: %w", from.ConfigMapRef.Name, err)
			}
			for _, k := range sortedKeys(cm.Data) {
				set(from.Prefix+k, cm.Data[k])
			}
		}
	}

	for _, e := range ctr.Env {
		value := e.Value
		switch {
		case value != "":
			value = expand(value, mappingOf(out))
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			v, err := fieldRefValue(pod, e.ValueFrom.FieldRef)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, err := getSecret(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("env %s: secret %q: %w", e.Name, ref.Name, err)
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				if isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("env %s: couldn't find key %s in Secret %s/%s", e.Name, ref.Key, pod.Namespace, ref.Name)
			}
			value = string(b)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := getConfigMap(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("env %s: configMap %q: %w", e.Name, ref.Name, err)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("env %s: couldn't find key %s in ConfigMap %s/%s", e.Name, ref.Key, pod.Namespace, ref.Name)
			}
			value = v
		default:
			return nil, fmt.Errorf("env %s: this valueFrom (resourceFieldRef, fileKeyRef) is not supported by the stand-in", e.Name)
		}
		set(e.Name, value)
	}
	return out, nil
}

// literalEnv is a container's environment from its env values alone (with
// $(VAR) expanded as the kubelet does), for containers the stand-in does
// not run: variables from envFrom or valueFrom are unknown, and listed in
// unknown.
func literalEnv(ctr *corev1.Container) (env []envVar, unknown map[string]bool) {
	unknown = map[string]bool{}
	for _, e := range ctr.Env {
		i := slices.IndexFunc(env, func(v envVar) bool { return v.Name == e.Name })
		if e.Value == "" && e.ValueFrom != nil {
			unknown[e.Name] = true
			if i >= 0 {
				env = slices.Delete(env, i, i+1)
			}
			continue
		}
		delete(unknown, e.Name)
		v := envVar{e.Name, expand(e.Value, mappingOf(env))}
		if i >= 0 {
			env[i] = v
		} else {
			env = append(env, v)
		}
	}
	return env, unknown
}

// fieldRefValue resolves a downward API field for the environment.
func fieldRefValue(pod *corev1.Pod, f *corev1.ObjectFieldSelector) (string, error) {
	if f.APIVersion != "" && f.APIVersion != "v1" {
		return "", fmt.Errorf("fieldRef apiVersion %q is not supported", f.APIVersion)
	}
	p := f.FieldPath
	if key, ok := subscript(p, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(p, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch p {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		return joinIPs(pod.Status.HostIPs, func(ip corev1.HostIP) string { return ip.IP }), nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		return joinIPs(pod.Status.PodIPs, func(ip corev1.PodIP) string { return ip.IP }), nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", p)
}

// subscript reads field['key'] (or field["key"]).
func subscript(p, field string) (string, bool) {
	rest, ok := strings.CutPrefix(p, field+"[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", false
	}
	rest = strings.TrimSuffix(rest, "]")
	if len(rest) >= 2 && (rest[0] == '\'' || rest[0] == '"') && rest[len(rest)-1] == rest[0] {
		return rest[1 : len(rest)-1], true
	}
	return "", false
}

func joinIPs[T any](ips []T, ip func(T) string) string {
	s := make([]string, len(ips))
	for i, x := range ips {
		s[i] = ip(x)
	}
	return strings.Join(s, ",")
}

// expandCommand is the container's command and args with $(VAR) expanded
// from its final environment, as the kubelet does.
func expandCommand(ctr *corev1.Container, env []envVar) []string {
	m := mappingOf(env)
	out := make([]string, 0, len(ctr.Command)+len(ctr.Args))
	for _, s := range ctr.Command {
		out = append(out, expand(s, m))
	}
	for _, s := range ctr.Args {
		out = append(out, expand(s, m))
	}
	return out
}

// envStrings is the environment as NAME=value, values translated to host
// paths.
func envStrings(env []envVar, mounts []Mount) []string {
	out := make([]string, len(env))
	for i, v := range env {
		value := v.Value
		if h, ok := translate(value, mounts); ok {
			value = h
		}
		out[i] = v.Name + "=" + value
	}
	return out
}

// mappingOf resolves variable names from env.
func mappingOf(env []envVar) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, v := range env {
			if v.Name == name {
				return v.Value, true
			}
		}
		return "", false
	}
}

// expand replaces $(VAR) references as the kubelet does
// (third_party/forked/golang/expansion): $(VAR) becomes the variable's
// value, or stays as written when the variable is unknown; $$ is an
// escaped $; a $ before anything else, and an unclosed $(, stay as they
// are.
func expand(s string, mapping func(string) (string, bool)) string {
	var b strings.Builder
	checkpoint := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		b.WriteString(s[checkpoint:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// An unclosed reference: "$(" is written as it is.
				b.WriteString("$(")
				i++
				break
			}
			name := s[i+2 : i+2+end]
			if v, ok := mapping(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			// Not a reference: the $ as it is, and the next character
			// read as text.
			b.WriteByte('$')
		}
		checkpoint = i + 1
	}
	return b.String() + s[checkpoint:]
}

func isTrue(b *bool) bool { return b != nil && *b }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
