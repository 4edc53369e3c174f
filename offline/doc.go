// Package offline runs manifests through modelgate's admission handlers
// without a cluster, for `modelgate render` and `modelgate test`: the very
// webhook.Mutating and webhook.Validating the server registers, fed with
// admission requests built from YAML files, a static NamespaceLabeler and
// policies loaded from disk. Nothing here mutates or judges an object
// itself; it only builds requests, applies the mutating answer's JSON patch
// as the API server does, and reports the answers.
//
// The one thing the handlers cannot tell is which objects the API server
// sends to the validating webhooks: that is decided by the namespace
// selectors and CEL match conditions of config/webhook. SentToPolicies
// mirrors them.
package offline
