package annotations

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds of the integer settings.
const (
	// MaxGPUs bounds modelgate.io/gpu.
	MaxGPUs = 64
	// MaxGPUMemoryMiB bounds modelgate.io/gpu-memory (1 TiB).
	MaxGPUMemoryMiB = 1 << 20
	// MaxWarmupTimeoutSeconds bounds modelgate.io/warmup-timeout (a day).
	MaxWarmupTimeoutSeconds = 86400
	// MaxHealthPathLength bounds modelgate.io/health-path.
	MaxHealthPathLength = 256
)

// ParseGPUAllocation parses a modelgate.io/gpu-allocation value.
func ParseGPUAllocation(s string) (Allocation, error) {
	for _, a := range GPUAllocations {
		if s == string(a) {
			return a, nil
		}
	}
	return "", fmt.Errorf("must be one of: %s, %s", AllocationDevicePlugin, AllocationDRA)
}

// ParseCache parses a modelgate.io/model-cache value: "disk", "memory" or
// "pvc:<claim>".
func ParseCache(s string) (Cache, error) {
	switch s {
	case string(CacheDisk):
		return Cache{Medium: CacheDisk}, nil
	case string(CacheMemory):
		return Cache{Medium: CacheMemory}, nil
	}
	if name, ok := strings.CutPrefix(s, string(CacheVolume)+":"); ok {
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			return Cache{}, fmt.Errorf(`volume %q in "volume:<name>" is not a valid volume name: %s`,
				name, strings.Join(msgs, "; "))
		}
		return Cache{Medium: CacheVolume, Volume: name}, nil
	}
	claim, ok := strings.CutPrefix(s, string(CachePVC)+":")
	if !ok {
		return Cache{}, errors.New(`must be "disk", "memory", "pvc:<claim>" or "volume:<name of a volume the serving container mounts>"`)
	}
	if msgs := validation.IsDNS1123Subdomain(claim); len(msgs) > 0 {
		return Cache{}, fmt.Errorf(`claim %q in "pvc:<claim>" is not a valid PersistentVolumeClaim name: %s`,
			claim, strings.Join(msgs, "; "))
	}
	return Cache{Medium: CachePVC, Claim: claim}, nil
}

// MaxModelSize bounds modelgate.io/model-size. Far larger than any model,
// it keeps sizes where resource.Quantity stays exact (past 2^63 it wraps).
const MaxModelSize = "1Pi"

var (
	minModelSize = resource.MustParse("1")
	maxModelSize = resource.MustParse(MaxModelSize)
)

// ParseQuantity parses a modelgate.io/model-size value: a quantity of bytes
// such as 16Gi, from 1 to MaxModelSize.
func ParseQuantity(s string) (resource.Quantity, error) {
	errSize := errors.New("must be a size from 1 to " + MaxModelSize + " bytes, such as 16Gi or 500M")
	if !plausibleQuantity(s) {
		return resource.Quantity{}, errSize
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Cmp(minModelSize) < 0 || q.Cmp(maxModelSize) > 0 {
		return resource.Quantity{}, errSize
	}
	return q, nil
}

// plausibleQuantity rejects, before resource.ParseQuantity sees them, the
// long numbers and far exponents no size needs: it can spend unbounded
// time on some of them (kubernetes/kubernetes#131063).
func plausibleQuantity(s string) bool {
	if len(s) > 32 {
		return false
	}
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '+' && r != '-' })
	if i < 0 {
		return true
	}
	suffix := s[i:]
	if suffix == "Ei" || len(suffix) < 2 || (suffix[0] != 'e' && suffix[0] != 'E') {
		return true
	}
	exp, err := strconv.Atoi(suffix[1:])
	return err == nil && exp >= -30 && exp <= 30
}

// ParsePositiveInt parses a decimal integer from 1 to maxValue, written as
// digits only (no sign, no spaces).
func ParsePositiveInt(s string, maxValue int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || err != nil || n < 1 || n > maxValue {
		return 0, fmt.Errorf("must be an integer from 1 to %d", maxValue)
	}
	return n, nil
}

// ParsePort parses a modelgate.io/port value: a port from 1 to 65535.
func ParsePort(s string) (int32, error) {
	n, err := ParsePositiveInt(s, math.MaxUint16)
	if err != nil || n < 1 || n > math.MaxUint16 {
		return 0, errors.New("must be a port number from 1 to 65535")
	}
	return int32(n), nil
}

// ParseHealthPath parses a modelgate.io/health-path value: an HTTP path
// starting with "/", of printable ASCII without spaces, at most
// MaxHealthPathLength characters.
func ParseHealthPath(s string) (string, error) {
	bad := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0
	if !strings.HasPrefix(s, "/") || bad || len(s) > MaxHealthPathLength {
		return "", fmt.Errorf("must be an HTTP path starting with \"/\" (for example /health), "+
			"without spaces or non-ASCII characters, at most %d characters", MaxHealthPathLength)
	}
	return s, nil
}

// ParseProducts parses a modelgate.io/gpu-product value: a comma-separated
// list of GPU products (node label values). Entries are trimmed and
// duplicates dropped, keeping the first.
func ParseProducts(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("must list at least one GPU product, separated by commas")
	}
	parts := strings.Split(s, ",")
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, errors.New("must be a comma-separated list of GPU products without empty entries")
		}
		if _, err := ParseProduct(p); err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// ParseProduct parses one GPU product: a node label value, not empty.
func ParseProduct(p string) (string, error) {
	if p == "" {
		return "", errors.New("must not be empty")
	}
	if msgs := validation.IsValidLabelValue(p); len(msgs) > 0 {
		return "", fmt.Errorf("product %q is not a valid label value: %s", p, strings.Join(msgs, "; "))
	}
	return p, nil
}

// ParseEngine parses a modelgate.io/engine value: one of Engines.
func ParseEngine(s string) (EngineName, error) {
	for _, e := range Engines {
		if s == string(e) {
			return e, nil
		}
	}
	names := make([]string, len(Engines))
	for i, e := range Engines {
		names[i] = string(e)
	}
	return "", fmt.Errorf("must be one of: %s", strings.Join(names, ", "))
}

// ParseMountPath parses a modelgate.io/model-mount value: an absolute, clean
// path other than "/", without ':' or control characters.
func ParseMountPath(s string) (string, error) {
	if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", errors.New("must not contain control characters or invalid UTF-8")
	}
	if !path.IsAbs(s) || path.Clean(s) != s || s == "/" || strings.Contains(s, ":") {
		return "", fmt.Errorf("must be an absolute, clean path other than \"/\" and without ':' (for example %s)",
			DefaultModelMount)
	}
	return s, nil
}

// ParseModelMount parses a modelgate.io/model-mount value: a path, a
// delivery ("image-volume" or "loader") with an optional ":<path>", or
// "engine" (nothing mounted: the engine reads the model itself).
func ParseModelMount(s string) (string, Delivery, error) {
	if s == string(DeliveryEngine) {
		return "", DeliveryEngine, nil
	}
	for _, d := range []Delivery{DeliveryImageVolume, DeliveryLoader} {
		if s == string(d) {
			return "", d, nil
		}
		if p, ok := strings.CutPrefix(s, string(d)+":"); ok {
			mount, err := ParseMountPath(p)
			if err != nil {
				return "", "", fmt.Errorf("path %q in %q: %w", p, string(d)+":<path>", err)
			}
			return mount, d, nil
		}
	}
	mount, err := ParseMountPath(s)
	if err != nil {
		return "", "", fmt.Errorf("%w; or %q or %q, each optionally followed by \":<path>\"; or %q (the engine reads the model itself)",
			err, DeliveryImageVolume, DeliveryLoader, DeliveryEngine)
	}
	return mount, "", nil
}

// ParseSecretName parses a modelgate.io/model-credentials value: a Secret
// name (a DNS-1123 subdomain).
func ParseSecretName(s string) (string, error) {
	return dnsName(s, "a Secret name", validation.IsDNS1123Subdomain)
}

// ParseContainerName parses a modelgate.io/container value: a container
// name (a DNS-1123 label).
func ParseContainerName(s string) (string, error) {
	return dnsName(s, "a container name", validation.IsDNS1123Label)
}

// ParseProfileName parses a modelgate.io/profile value: a profile name (a
// DNS-1123 label).
func ParseProfileName(s string) (string, error) {
	return dnsName(s, "a profile name", validation.IsDNS1123Label)
}

func dnsName(s, what string, check func(string) []string) (string, error) {
	if msgs := check(s); len(msgs) > 0 {
		return "", fmt.Errorf("must be %s: %s", what, strings.Join(msgs, "; "))
	}
	return s, nil
}
