// Package version is modelgate's build version, set when the binary is
// linked, and what it says about the release the binary belongs to.
package version

import (
	"regexp"
	"strings"
)

// Version is the version modelgate was built as. The modelgate command
// sets it from its main.version, the link target of make build, make
// image and the Dockerfile (-ldflags "-X main.version=<version>", with
// `git describe --tags --always --dirty`); a build may also set it
// directly with -X github.com/modelgate/modelgate/internal/version.Version.
// It is "dev" when nothing did (go build, go run, go test).
var Version = "dev"

// releaseRE is vMAJOR.MINOR.PATCH with an optional pre-release of
// dot-separated letters and digits (v1.2.0, v1.3.0-rc.1).
var releaseRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z]+(\.[0-9A-Za-z]+)*)?$`)

// IsRelease reports whether v names a release, whose image modelgate
// publishes under that tag: vX.Y.Z or vX.Y.Z-<pre-release> (v1.3.0-rc.1).
// What git describe gives between tags (v1.2.0-3-gabc1234), for a
// modified tree (v1.2.0-dirty) or without any tag (abc1234) is not one,
// and neither is "dev".
func IsRelease(v string) bool {
	if !releaseRE.MatchString(v) {
		return false
	}
	_, pre, _ := strings.Cut(v, "-")
	for _, id := range strings.Split(pre, ".") {
		if id == "dirty" {
			return false
		}
	}
	return true
}
