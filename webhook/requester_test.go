package webhook

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/ptr"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
)

func TestIsTrusted(t *testing.T) {
	custom := &config.TrustedRequesters{
		Usernames:        []string{"system:kube-controller-manager", "argo"},
		UsernamePrefixes: []string{"system:serviceaccount:kube-system:"},
		Groups:           []string{"platform:controllers"},
	}
	cases := map[string]struct {
		user    authenticationv1.UserInfo
		trusted *config.TrustedRequesters
		want    bool
	}{
		"exact username": {
			user: authenticationv1.UserInfo{Username: "system:kube-controller-manager"}, trusted: custom, want: true,
		},
		"username is not a prefix match": {
			user: authenticationv1.UserInfo{Username: "argocd"}, trusted: custom, want: false,
		},
		"username prefix": {
			user: authenticationv1.UserInfo{Username: rsCtrl}, trusted: custom, want: true,
		},
		"other namespace's service account": {
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:replicaset-controller"}, trusted: custom, want: false,
		},
		"prefix itself": {
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:"}, trusted: custom, want: true,
		},
		"group": {
			user: authenticationv1.UserInfo{Username: "ci-bot", Groups: []string{"system:authenticated", "platform:controllers"}}, trusted: custom, want: true,
		},
		"unlisted group": {
			user: authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated", "platform"}}, trusted: custom, want: false,
		},
		"empty username never trusted, even in a trusted group": {
			user: authenticationv1.UserInfo{Username: "", Groups: []string{"platform:controllers"}}, trusted: custom, want: false,
		},
		"empty username with an empty prefix configured": {
			user: authenticationv1.UserInfo{}, trusted: &config.TrustedRequesters{UsernamePrefixes: []string{""}, Usernames: []string{""}}, want: false,
		},
		"nil configuration": {
			user: authenticationv1.UserInfo{Username: "system:kube-controller-manager"}, trusted: nil, want: false,
		},
		"empty configuration": {
			user:    authenticationv1.UserInfo{Username: "system:kube-controller-manager", Groups: []string{"system:masters"}},
			trusted: &config.TrustedRequesters{}, want: false,
		},
		"defaults trust the controller manager": {
			user: authenticationv1.UserInfo{Username: "system:kube-controller-manager"}, trusted: config.DefaultTrustedRequesters(), want: true,
		},
		"defaults trust kube-system service accounts": {
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:job-controller"}, trusted: config.DefaultTrustedRequesters(), want: true,
		},
		"defaults do not trust cluster admins": {
			user: authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters"}}, trusted: config.DefaultTrustedRequesters(), want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := isTrusted(tc.user, tc.trusted); got != tc.want {
				t.Errorf("isTrusted(%+v) = %v, want %v", tc.user, got, tc.want)
			}
		})
	}
}

func TestRequesterFrom(t *testing.T) {
	u := authenticationv1.UserInfo{Username: rsCtrl, Groups: []string{"system:serviceaccounts"}, UID: "1234"}
	want := mutators.Requester{Username: rsCtrl, Groups: []string{"system:serviceaccounts"}, Trusted: true}
	if diff := cmp.Diff(want, requesterFrom(u, config.DefaultTrustedRequesters())); diff != "" {
		t.Errorf("requesterFrom (-want +got):\n%s", diff)
	}
}

// TestTrustedRequestersIncludeTheController: the AIInference controller's
// service account is trusted to carry an AIInference's sealed owner onto
// its Deployment while the controller runs, and not once it is turned off;
// the configuration itself is left as it was loaded.
func TestTrustedRequestersIncludeTheController(t *testing.T) {
	self := authenticationv1.UserInfo{Username: "system:serviceaccount:modelgate-system:modelgate"}
	other := authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:modelgate"}
	cfg := config.New()
	cfg.Namespace = "modelgate-system"
	if !isTrusted(self, trustedRequesters(cfg)) {
		t.Errorf("%s is not trusted while the controller runs", self.Username)
	}
	if isTrusted(other, trustedRequesters(cfg)) {
		t.Errorf("%s, a service account of the same name in another namespace, is trusted", other.Username)
	}
	if slices.Contains(cfg.Injection.TrustedRequesters.Usernames, self.Username) {
		t.Errorf("trustedRequesters changed the configuration: %v", cfg.Injection.TrustedRequesters.Usernames)
	}
	cfg.Controller.Enabled = ptr.To(false)
	if isTrusted(self, trustedRequesters(cfg)) {
		t.Errorf("%s is trusted with the controller turned off", self.Username)
	}
}
