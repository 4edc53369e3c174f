// Package certs will hold modelgate's serving-certificate management: the
// cert-manager mode and self-managed rotation. Today `modelgate serve`
// serves the files in --cert-dir and reloads them when they change.
package certs
