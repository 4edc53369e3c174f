package webhook

import "errors"

var (
	// errEmptyObject is returned for a review whose object is missing.
	errEmptyObject = errors.New("the admission request carries no object")
	// errNamespaceNotCached is returned when the object's namespace has not
	// reached modelgate's cache within the configured wait.
	errNamespaceNotCached = errors.New("namespace is not in modelgate's cache yet; retry the request")
)
