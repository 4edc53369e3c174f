package imagebuild

import (
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultPlatforms are the platforms built when none are chosen.
func DefaultPlatforms() []v1.Platform {
	return []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
}

// ParsePlatforms parses a comma-separated list of platforms such as
// "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := v1.ParsePlatform(part)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", part, err)
		}
		if err := checkPlatform(*p); err != nil {
			return nil, err
		}
		if seen[platformString(*p)] {
			return nil, fmt.Errorf("platform %q is listed twice", part)
		}
		seen[platformString(*p)] = true
		out = append(out, *p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q: want a list such as linux/amd64,linux/arm64", s)
	}
	return out, nil
}

func checkPlatform(p v1.Platform) error {
	if p.OS != "linux" {
		return fmt.Errorf("platform %q: the image is linux only", platformString(p))
	}
	_, err := goEnv(p)
	return err
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// goEnv is the environment that makes go build a static binary for p. It
// sets the architecture level too, so that a GOAMD64 or GOARM64 in the
// builder's environment cannot change the image.
func goEnv(p v1.Platform) ([]string, error) {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	bad := func(want string) error {
		return fmt.Errorf("platform %q: %s", platformString(p), want)
	}
	switch p.Architecture {
	case "amd64":
		switch p.Variant {
		case "":
			env = append(env, "GOAMD64=v1")
		case "v1", "v2", "v3", "v4":
			env = append(env, "GOAMD64="+p.Variant)
		default:
			return nil, bad("the amd64 variant can only be one of v1, v2, v3 or v4")
		}
	case "arm64":
		switch p.Variant {
		case "", "v8":
			env = append(env, "GOARM64=v8.0")
		default:
			return nil, bad("the arm64 variant can only be v8")
		}
	case "":
		return nil, bad("the architecture is missing")
	default:
		return nil, bad("the architecture can only be amd64 or arm64")
	}
	return env, nil
}
