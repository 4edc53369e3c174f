package webhook

import "errors"

var (
	// errNamespaceNotCached is returned when the object's namespace has not
	// reached modelgate's cache within the configured wait.
	errNamespaceNotCached = errors.New("namespace is not in modelgate's cache yet; retry the request")
)
