package mutators

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// credentialEnv is how the Secret of modelgate.io/model-credentials reaches
// the loader, and only the loader: every key of it as a variable
// (envFrom), and each pair of modelgate.io/model-credentials-keys as a
// variable taking one key's value (env, secretKeyRef), in the order
// written. A variable in env wins over the same name from envFrom
// (Kubernetes), so a mapped key overrides a key of the Secret that happens
// to be named like the variable. Both are nil without a Secret.
//
// Neither is optional: a Secret or a mapped key that does not exist keeps
// the loader from starting (CreateContainerConfigError, naming the Secret
// and the key) rather than letting it run without credentials.
func credentialEnv(m *annotations.ModelSettings) ([]corev1.EnvFromSource, []corev1.EnvVar) {
	if m.Credentials == "" {
		return nil, nil
	}
	ref := corev1.LocalObjectReference{Name: m.Credentials}
	from := []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref}}}
	var env []corev1.EnvVar
	for _, k := range m.CredentialKeys {
		env = append(env, corev1.EnvVar{Name: k.Env, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref, Key: k.Key},
		}})
	}
	return from, env
}
