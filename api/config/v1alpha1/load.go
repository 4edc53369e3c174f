package v1alpha1

import (
	"errors"
	"fmt"
	"os"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrInvalid is wrapped by every error Load and Parse return for a file
// that is malformed or fails validation (as opposed to one that cannot be
// read).
var ErrInvalid = errors.New("invalid configuration")

// Load reads, strictly decodes, defaults and validates the Configuration in
// the file at path.
func Load(path string) (*Configuration, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the path is the operator's own flag.
	if err != nil {
		return nil, fmt.Errorf("reading configuration: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("configuration file %s: %w", path, err)
	}
	return c, nil
}

// Parse strictly decodes, defaults and validates a Configuration document.
// An unknown, duplicated or mistyped field is an error naming the field.
func Parse(data []byte) (*Configuration, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c := &Configuration{}
	strict, err := kjson.UnmarshalStrict(js, c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(strict...))
	}
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return nil, fmt.Errorf("%w: apiVersion %q and kind %q: must be apiVersion %q and kind %q",
			ErrInvalid, c.APIVersion, c.Kind, APIVersion, Kind)
	}
	Default(c)
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errs.ToAggregate())
	}
	return c, nil
}
