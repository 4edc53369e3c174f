// Package pack builds an OCI image of a model directory and pushes it:
// the image behind `modelgate pack`, mounted as a Kubernetes image volume.
//
// The image holds the directory as it is, byte for byte: an image volume
// of it mounted at /models is what `modelgate load` would have written at
// /models. Building is reproducible: the same directory gives the same
// index digest on any machine, whatever its files' owners, times or umask.
//
// Every file of at least Options.LayerThreshold is a layer of its own, so
// that a registry and a node share the large weights between versions and
// a changed file changes one layer; the small files, the symbolic links
// and the directories share one last layer. Layers are uncompressed tar
// (weights do not compress), streamed from disk and hashed in one pass.
//
// Build makes the image index (one manifest for linux/amd64 and one for
// linux/arm64, sharing the layers), Push writes it to a registry and
// Verify reads it back. The package knows nothing of flags, of the loader
// or of Kubernetes.
package pack
