package webhook

import (
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/webhook/config"
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
