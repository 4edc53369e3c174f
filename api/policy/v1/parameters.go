/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Parameters decodes spec.parameters into the value the policy sees as
// input.parameters. Unset (or null) parameters are an empty map. Numbers are
// json.Number, so large integers keep their exact value. Anything but a JSON
// object is an error that names spec.parameters; the CRD's schema already
// rejects those, so the error means the object skipped validation.
func (p *WorkloadPolicy) Parameters() (map[string]any, error) {
	if p.Spec.Parameters == nil || len(bytes.TrimSpace(p.Spec.Parameters.Raw)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(p.Spec.Parameters.Raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("spec.parameters: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("spec.parameters: must be a single JSON object, found data after it")
	}
	switch v := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("spec.parameters: must be an object, not %s", jsonKind(v))
	}
}

// jsonKind names the JSON type of a value decoded with UseNumber.
func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}
