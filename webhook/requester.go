package webhook

import (
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
)

// requesterFrom builds the mutators' view of who sent the request.
func requesterFrom(u authenticationv1.UserInfo, t *config.TrustedRequesters) mutators.Requester {
	return mutators.Requester{
		Username: u.Username,
		Groups:   u.Groups,
		Trusted:  isTrusted(u, t),
	}
}

// isTrusted reports whether the user is a template-copying controller.
func isTrusted(u authenticationv1.UserInfo, t *config.TrustedRequesters) bool {
	if t == nil || u.Username == "" {
		return false
	}
	if slices.Contains(t.Usernames, u.Username) {
		return true
	}
	for _, p := range t.UsernamePrefixes {
		if strings.HasPrefix(u.Username, p) {
			return true
		}
	}
	for _, g := range u.Groups {
		if slices.Contains(t.Groups, g) {
			return true
		}
	}
	return false
}

// trustedRequesters are the configured template-copying controllers and,
// when the AIInference controller runs, modelgate's own service account:
// the controller copies an AIInference's sealed owner metadata onto the
// Deployment it writes, as the ReplicaSet controller copies a template.
func trustedRequesters(cfg *config.Configuration) *config.TrustedRequesters {
	t := &config.TrustedRequesters{}
	if c := cfg.Injection.TrustedRequesters; c != nil {
		t = &config.TrustedRequesters{Usernames: slices.Clone(c.Usernames),
			UsernamePrefixes: slices.Clone(c.UsernamePrefixes), Groups: slices.Clone(c.Groups)}
	}
	if cfg.ControllerEnabled() && cfg.Controller.ServiceAccountName != "" {
		t.Usernames = append(t.Usernames, cfg.ControllerUsername())
	}
	return t
}
