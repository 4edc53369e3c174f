// Package certs manages modelgate's serving certificate in its three modes:
//
//   - files: a certificate and key at a path (mounted from a Secret that
//     cert-manager or the operator keeps), reloaded when they change;
//   - cert-manager: the same, with the Secret written by cert-manager and
//     the CA bundle injected by its cainjector (config/certmanager);
//   - self: modelgate creates a CA and a serving certificate, keeps them in
//     one Secret all replicas share, injects the CA bundle into its webhook
//     configurations and CRD conversion, and rotates both before they
//     expire.
//
// In self mode the CA rolls over in two steps so that no replica ever
// serves a certificate the API server does not trust yet: a new CA is
// first added to the bundle, the bundle is injected, and only then is a
// serving certificate issued by the new CA. The old CA stays in the bundle
// until it expires. Replicas need no leader: every write to the Secret is
// an optimistic update on its resourceVersion, and a replica that loses a
// race adopts the winner's Secret.
package certs
