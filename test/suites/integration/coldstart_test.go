package integration_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// coldPolicies is how many WorkloadPolicies the cold start loads (issue 17:
// Ready in under a second with 100).
const coldPolicies = 100

var _ = Describe("cold start", Ordered, func() {
	It(fmt.Sprintf("is Ready with %d WorkloadPolicies, every one of them in force", coldPolicies), func(ctx SpecContext) {
		ns := namespace(ctx, nil)
		// The shipped library's samples repeated to 100, each under its
		// own name and scoped to this namespace: the suite's other specs
		// never meet them. The last one created is a required-owner-team.
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		lib, err := builders.SamplePolicies(filepath.Join(root, "config/samples/policies"))
		Expect(err).NotTo(HaveOccurred())
		Expect(lib).To(HaveLen(8))
		var owner int
		for i, wp := range lib {
			if wp.Name == "required-owner-team" {
				owner = i
			}
		}
		pc, err := client.New(adminCfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		var (
			names   []string
			created []*policyv1.WorkloadPolicy
		)
		// Out of the suite modelgate's force before the next spec.
		DeferCleanup(func(ctx context.Context) { deletePolicy(ctx, pc, created...) })
		for i := range coldPolicies {
			src := lib[((owner+i-(coldPolicies-1))%len(lib)+len(lib))%len(lib)]
			wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cold-%s-%d", src.Name, i)}}
			src.Spec.DeepCopyInto(&wp.Spec)
			wp.Spec.Match.Namespaces = []string{ns}
			wp.Spec.Match.NamespaceSelector = nil
			Expect(pc.Create(ctx, wp)).To(Succeed())
			created = append(created, wp)
			names = append(names, wp.Name)
		}
		last := names[len(names)-1]
		Expect(last).To(HavePrefix("cold-required-owner-team-"))
		// The suite's modelgate compiles them all first, so that its
		// status writes do not run during the measured start.
		Eventually(func(g Gomega) {
			var list policyv1.WorkloadPolicyList
			g.Expect(pc.List(ctx, &list)).To(Succeed())
			ready := 0
			for _, wp := range list.Items {
				if strings.HasPrefix(wp.Name, "cold-") && meta.IsStatusConditionTrue(wp.Status.Conditions, policyv1.ConditionReady) {
					ready++
				}
			}
			g.Expect(ready).To(Equal(coldPolicies))
		}).WithTimeout(time.Minute).Should(Succeed())

		// A second replica starts: manager built, caches synced, every
		// policy compiled, Ready.
		cfg := config.New()
		cfg.Webhook.Host = "127.0.0.1"
		cfg.Webhook.Port = freePort()
		certDir := GinkgoT().TempDir()
		cfg.Webhook.CertDir = certDir
		writeServingCert(certDir)
		cfg.Metrics.BindAddress = "0"
		cfg.Health.BindAddress = fmt.Sprintf("127.0.0.1:%d", freePort())
		cfg.DrainPeriod.Duration = 0
		start := time.Now()
		mgr, err := webhook.NewManager(adminCfg, cfg)
		Expect(err).NotTo(HaveOccurred())
		stop, done := runManager(mgr)
		DeferCleanup(func() {
			stop()
			Eventually(done).WithTimeout(15 * time.Second).Should(BeClosed())
		})
		Eventually(func() int { code, _ := readyz(cfg.Health.BindAddress); return code }).
			WithTimeout(time.Minute).WithPolling(5*time.Millisecond).Should(Equal(http.StatusOK), "not Ready after a minute")
		took := time.Since(start)
		AddReportEntry(fmt.Sprintf("cold start to Ready with %d WorkloadPolicies", coldPolicies), took.Round(time.Millisecond).String())

		// Ready means in force: the first review it answers is judged by
		// every copy of required-owner-team, the last one created included.
		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "no-owner"})
		raw, err := json.Marshal(d)
		Expect(err).NotTo(HaveOccurred())
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: types.UID("cold"), Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
				Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
				Namespace: ns, Name: "no-owner", Operation: admissionv1.Create,
			},
		}
		review.Request.Object.Raw = raw
		body, err := json.Marshal(review)
		Expect(err).NotTo(HaveOccurred())
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // InsecureSkipVerify: the test's own certificate.
		url := "https://" + net.JoinHostPort(cfg.Webhook.Host, strconv.Itoa(int(cfg.Webhook.Port))) + webhook.ValidatePath
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body)) //nolint:noctx // a test request.
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		var answer admissionv1.AdmissionReview
		Expect(json.NewDecoder(resp.Body).Decode(&answer)).To(Succeed())
		Expect(answer.Response).NotTo(BeNil())
		Expect(answer.Response.Allowed).To(BeFalse())
		msg := answer.Response.Result.Message
		copies := 0
		for _, n := range names {
			if strings.HasPrefix(n, "cold-required-owner-team-") {
				copies++
				Expect(msg).To(ContainSubstring("["+n+"] label modelgate.io/owner is missing"), "policy %s not in force at Ready", n)
			}
		}
		Expect(copies).To(BeNumerically(">=", coldPolicies/len(lib)))
		Expect(msg).To(ContainSubstring("[" + last + "]"))
	})
})
