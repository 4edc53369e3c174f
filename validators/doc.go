// Package validators will hold modelgate's built-in structural checks of AI
// workloads (each a small function returning field.ErrorList) and the
// adapter that runs Rego policies from package policies at admission.
// Nothing is registered from it yet.
package validators
