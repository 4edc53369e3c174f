package install

import (
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/certs"
)

// The phrases of the policy's messages the tests expect, and how the API
// server names the policy in a denial.
const (
	deniedByPolicy   = "ValidatingAdmissionPolicy '" + caBundlePolicy + "' with binding '" + caBundlePolicy + "' denied request"
	msgNotDelete     = "may only change the caBundle fields of %s, not delete it"
	msgMetadata      = "may only change the caBundle fields of %s, not its labels, annotations, owner references, finalizers or other metadata"
	msgWebhookList   = "may only change the caBundle of each webhook in %s, not add, remove, rename or reorder webhooks"
	msgWebhookFields = "may only change clientConfig.caBundle of each webhook in %s, not its rules"
	msgCRD           = "may only change spec.conversion.webhook.clientConfig.caBundle of %s, not its versions"
)

// testBundle is a PEM CA bundle for the caBundle changes the tests make.
func testBundle(t *testing.T) []byte {
	t.Helper()
	ca, err := certs.NewCA("policy-test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

// policyCase is an update of one of the three objects: a fresh copy is
// read, edit changes it, and the update is denied with a message holding
// deny, or allowed when deny is empty.
type policyCase struct {
	obj  func() client.Object
	edit func(client.Object)
	deny string
}

// mutatingCase, validatingCase and crdCase are policyCases on
// modelgate-mutating, modelgate-validating and the AIInference CRD; deny is
// a message phrase with %s for the object's name.
func mutatingCase(deny string, edit func(*admissionregistrationv1.MutatingWebhookConfiguration)) policyCase {
	return policyCase{
		obj: func() client.Object {
			return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "modelgate-mutating"}}
		},
		edit: func(o client.Object) { edit(o.(*admissionregistrationv1.MutatingWebhookConfiguration)) },
		deny: fmtName(deny, "modelgate-mutating"),
	}
}

func validatingCase(deny string, edit func(*admissionregistrationv1.ValidatingWebhookConfiguration)) policyCase {
	return policyCase{
		obj: func() client.Object {
			return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "modelgate-validating"}}
		},
		edit: func(o client.Object) { edit(o.(*admissionregistrationv1.ValidatingWebhookConfiguration)) },
		deny: fmtName(deny, "modelgate-validating"),
	}
}

func crdCase(deny string, edit func(*apiextensionsv1.CustomResourceDefinition)) policyCase {
	return policyCase{
		obj: func() client.Object {
			return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: aiInferenceCRD}}
		},
		edit: func(o client.Object) { edit(o.(*apiextensionsv1.CustomResourceDefinition)) },
		deny: fmtName(deny, aiInferenceCRD),
	}
}

// fmtName puts the object's name into a message phrase.
func fmtName(phrase, name string) string { return strings.Replace(phrase, "%s", name, 1) }

// run reads a fresh copy as c, edits it and updates it, checking the
// answer.
func (pc policyCase) run(t *testing.T, c client.Client, opts ...client.UpdateOption) {
	t.Helper()
	obj := pc.obj()
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	pc.edit(obj)
	expectAnswer(t, c.Update(t.Context(), obj, opts...), pc.deny)
}

// expectAnswer checks that err is nil when deny is empty, and otherwise a
// Forbidden from the policy whose message holds deny.
func expectAnswer(t *testing.T, err error, deny string) {
	t.Helper()
	switch {
	case deny == "" && err != nil:
		t.Errorf("denied, want allowed: %v", err)
	case deny == "":
	case err == nil:
		t.Errorf("allowed, want denied with %q", deny)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), deniedByPolicy) || !strings.Contains(err.Error(), deny):
		t.Errorf("answer %v (reason %s), want Forbidden by the policy with %q", err, apierrors.ReasonForError(err), deny)
	default:
		t.Logf("denied: %v", err)
	}
}

// TestCABundlePolicyAPIServer proves config/self-managed's CA bundle policy
// through a real kube-apiserver holding the install: modelgate's service
// account, with the install's RBAC, can change the caBundle fields of its
// webhook configurations and CRD and nothing else, and delete none of
// them; other users are not restricted; and the real certificate rotator,
// as that account, still injects.
func TestCABundlePolicyAPIServer(t *testing.T) {
	s := startPolicyServer(t)
	bundle := testBundle(t)
	otherRule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}

	t.Run("modelgate's service account", func(t *testing.T) {
		for name, tc := range map[string]policyCase{
			// What CA injection does: allowed.
			"mutating: the caBundle of every webhook": mutatingCase("", func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				for i := range m.Webhooks {
					m.Webhooks[i].ClientConfig.CABundle = bundle
				}
			}),
			"mutating: the caBundle of one webhook": mutatingCase("", func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[1].ClientConfig.CABundle = append(slices.Clone(bundle), bundle...)
			}),
			"validating: the caBundle of every webhook": validatingCase("", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				for i := range v.Webhooks {
					v.Webhooks[i].ClientConfig.CABundle = bundle
				}
			}),
			"crd: the conversion webhook's caBundle": crdCase("", func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion.Webhook.ClientConfig.CABundle = bundle
			}),

			// Each webhook field but the caBundle.
			"mutating: rules widened": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].Rules = append(m.Webhooks[0].Rules, otherRule)
			}),
			"mutating: service re-pointed": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].ClientConfig.Service.Namespace = "elsewhere"
			}),
			"mutating: service path": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[2].ClientConfig.Service.Path = ptr.To("/allow-all")
			}),
			"mutating: URL instead of the service": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].ClientConfig.Service = nil
				m.Webhooks[0].ClientConfig.URL = ptr.To("https://attacker.example.com/mutate")
			}),
			"mutating: failurePolicy Ignore": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}),
			"mutating: namespaceSelector emptied": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{}
			}),
			"mutating: objectSelector set": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"never": "set"}}
			}),
			"mutating: matchConditions removed": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				for i := range m.Webhooks {
					m.Webhooks[i].MatchConditions = nil
				}
			}),
			"mutating: reinvocationPolicy": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].ReinvocationPolicy = ptr.To(admissionregistrationv1.NeverReinvocationPolicy)
			}),
			"mutating: timeoutSeconds": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].TimeoutSeconds = ptr.To[int32](1)
			}),
			"mutating: a rule and the caBundle together": mutatingCase(msgWebhookFields, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks[0].ClientConfig.CABundle = bundle
				m.Webhooks[0].Rules = append(m.Webhooks[0].Rules, otherRule)
			}),
			"validating: rules narrowed": validatingCase(msgWebhookFields, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}
			}),
			"validating: matchPolicy Exact": validatingCase(msgWebhookFields, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Webhooks[0].MatchPolicy = ptr.To(admissionregistrationv1.Exact)
			}),
			"validating: sideEffects": validatingCase(msgWebhookFields, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
			}),
			"validating: admissionReviewVersions": validatingCase(msgWebhookFields, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Webhooks[0].AdmissionReviewVersions = []string{"v1", "v1beta1"}
			}),
			"validating: namespaceSelector of the last webhook": validatingCase(msgWebhookFields, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				// Narrowed to namespaces that opt out of modelgate.
				v.Webhooks[len(v.Webhooks)-1].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"modelgate.io/ignore": "true"}}
			}),

			// The list of webhooks.
			"mutating: a webhook added": mutatingCase(msgWebhookList, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				w := *m.Webhooks[0].DeepCopy()
				w.Name = "extra.modelgate.io"
				m.Webhooks = append(m.Webhooks, w)
			}),
			"mutating: a webhook removed": mutatingCase(msgWebhookList, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Webhooks = m.Webhooks[1:]
			}),
			"validating: webhooks reordered": validatingCase(msgWebhookList, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Webhooks[0], v.Webhooks[1] = v.Webhooks[1], v.Webhooks[0]
			}),
			"validating: a webhook renamed": validatingCase(msgWebhookList, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Webhooks[0].Name = "renamed.modelgate.io"
			}),

			// Metadata.
			"mutating: a label": mutatingCase(msgMetadata, func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
				m.Labels = map[string]string{"app.kubernetes.io/managed-by": "someone-else"}
			}),
			"validating: an annotation": validatingCase(msgMetadata, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.Annotations = map[string]string{"note": "x"}
			}),
			"validating: an owner reference (garbage collection would delete it)": validatingCase(msgMetadata, func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
				v.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "gone", UID: "0b6d4a6c-0000-4000-8000-000000000000"}}
			}),
			"crd: a finalizer": crdCase(msgMetadata, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Finalizers = append(c.Finalizers, "example.com/hold")
			}),

			// The CRD.
			"crd: conversion service re-pointed": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion.Webhook.ClientConfig.Service.Name = "attacker"
			}),
			"crd: conversion URL": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion.Webhook.ClientConfig.Service = nil
				c.Spec.Conversion.Webhook.ClientConfig.URL = ptr.To("https://attacker.example.com/convert")
			}),
			"crd: conversion strategy None": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			}),
			"crd: conversionReviewVersions": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion.Webhook.ConversionReviewVersions = []string{"v1", "v1beta1"}
			}),
			"crd: a version no longer served": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				for i := range c.Spec.Versions {
					if !c.Spec.Versions[i].Storage {
						c.Spec.Versions[i].Served = false
						return
					}
				}
			}),
			"crd: the schema opened": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[0].Schema.OpenAPIV3Schema.XPreserveUnknownFields = ptr.To(true)
			}),
			"crd: a short name": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Names.ShortNames = append(c.Spec.Names.ShortNames, "ai")
			}),
			"crd: the caBundle and the service together": crdCase(msgCRD, func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion.Webhook.ClientConfig.CABundle = bundle
				c.Spec.Conversion.Webhook.ClientConfig.Service.Port = ptr.To[int32](8443)
			}),
		} {
			t.Run(name, func(t *testing.T) { tc.run(t, s.modelgate) })
		}
	})

	t.Run("modelgate's service account may not delete", func(t *testing.T) {
		// The install grants no delete, so RBAC refuses first. Granted
		// delete (a mistake in another overlay), the policy still
		// refuses.
		grant(t, s, "test-delete", []string{"delete"})
		for name, obj := range caTargets() {
			t.Run(name, func(t *testing.T) {
				// A dry run: admission runs as for real, and a policy that
				// let it through would not take the object from the next
				// tests.
				expectAnswer(t, s.modelgate.Delete(t.Context(), obj, client.DryRunAll), fmtName(msgNotDelete, obj.GetName()))
			})
		}
	})

	t.Run("other users are not restricted", func(t *testing.T) {
		// Another service account with modelgate's permissions on these
		// objects, and delete: only modelgate's own is restricted.
		other := serviceAccountUser("elsewhere", "modelgate")
		grant(t, s, "test-other", []string{"get", "update", "delete"}, rbacv1.Subject{Kind: rbacv1.UserKind, Name: other})
		for who, c := range map[string]client.Client{"the administrator": s.admin, other: s.as(t, other)} {
			t.Run(who, func(t *testing.T) {
				// Dry runs: admission runs as for real, nothing changes.
				mutatingCase("", func(m *admissionregistrationv1.MutatingWebhookConfiguration) {
					m.Webhooks[0].Rules = append(m.Webhooks[0].Rules, otherRule)
					m.Labels = map[string]string{"changed": "yes"}
				}).run(t, c, client.DryRunAll)
				crdCase("", func(c *apiextensionsv1.CustomResourceDefinition) {
					c.Spec.Conversion.Webhook.ClientConfig.Service.Name = "elsewhere"
				}).run(t, c, client.DryRunAll)
				for _, obj := range caTargets() {
					expectAnswer(t, c.Delete(t.Context(), obj, client.DryRunAll), "")
				}
			})
		}
	})

	t.Run("the certificate rotator injects as modelgate's service account", func(t *testing.T) {
		testRotatorUnderPolicy(t, s)
	})

	t.Run("the policy type-checks without warnings", func(t *testing.T) {
		testTypeChecking(t, s)
	})
}
