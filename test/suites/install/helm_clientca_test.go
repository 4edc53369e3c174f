package install

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// TestHelmChartWebhookClientCA: webhook.clientCA.configMap mounts the
// ConfigMap's key as ca.crt and points the Configuration's
// webhook.clientCAFile at it; without it, neither is there.
func TestHelmChartWebhookClientCA(t *testing.T) {
	const dir, file = "/etc/modelgate-webhook-client-ca", "/etc/modelgate-webhook-client-ca/ca.crt"
	for name, tc := range map[string]struct {
		set       []string
		configMap string
		key       string
	}{
		"off by default": {},
		"a ConfigMap":    {set: []string{"webhook.clientCA.configMap=apiserver-webhook-client-ca"}, configMap: "apiserver-webhook-client-ca", key: "ca.crt"},
		"another key": {
			set:       []string{"webhook.clientCA.configMap=extension-ca", "webhook.clientCA.key=client-ca-file"},
			configMap: "extension-ca", key: "client-ca-file",
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := env.DecodeStrict(mustHelmTemplate(t, env.Namespace, tc.set...))
			if err != nil {
				t.Fatal(err)
			}
			cfg := installConfiguration(t, objs) // strictly parsed, defaulted, validated
			d := only[*appsv1.Deployment](t, objs)
			var vol *corev1.Volume
			for i, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "webhook-client-ca" {
					vol = &d.Spec.Template.Spec.Volumes[i]
				}
			}
			var mount *corev1.VolumeMount
			c := modelgateContainer(t, d)
			for i, m := range c.VolumeMounts {
				if m.Name == "webhook-client-ca" {
					mount = &c.VolumeMounts[i]
				}
			}
			if tc.configMap == "" {
				if cfg.Webhook.ClientCAFile != "" || vol != nil || mount != nil {
					t.Errorf("webhook.clientCAFile %q, volume %v, mount %v: want none", cfg.Webhook.ClientCAFile, vol, mount)
				}
				return
			}
			if cfg.Webhook.ClientCAFile != file {
				t.Errorf("webhook.clientCAFile = %q, want %s", cfg.Webhook.ClientCAFile, file)
			}
			if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != tc.configMap ||
				len(vol.ConfigMap.Items) != 1 || vol.ConfigMap.Items[0] != (corev1.KeyToPath{Key: tc.key, Path: "ca.crt"}) {
				t.Errorf("volume %+v: want ConfigMap %s's %s as ca.crt", vol, tc.configMap, tc.key)
			}
			if mount == nil || mount.MountPath != dir || !mount.ReadOnly {
				t.Errorf("mount %+v: want %s, read-only", mount, dir)
			}
		})
	}
}
