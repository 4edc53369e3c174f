// Package loader is `modelgate load`: it puts a model into a directory so
// that it is either there whole and verified, or not there at all.
//
// A Source (one sub-package per scheme: s3, gcs, hf, https, oci) resolves a
// model URI to a fixed version and lists its files with the digests it
// vouches for; Load fetches them with parallel ranged reads into a staging
// area inside the destination, verifies every digest, moves each file to
// its final path (a plain directory, or a Hugging Face hub cache), and
// writes the manifest last: the manifest is the one signal that the model
// is complete. A killed load resumes from its last checkpoint; several
// loaders sharing one destination elect one holder by a lock whose
// liveness is its progress.
//
// The package imports nothing of modelgate's webhook or Kubernetes server
// code.
package loader
