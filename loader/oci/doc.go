// Package oci is the loader.Source for models kept in an OCI registry:
// oci://registry[:port]/repository[:tag|@sha256:...].
//
// List resolves the tag to a manifest digest (picking linux/GOARCH, or the
// only entry, from an image index) and turns each layer into a File whose
// Key, Version and SHA-256 digest are the layer's blob digest. The layer's
// media type and annotations say where its content goes:
//
//   - CNCF ModelPack (application/vnd.cncf.model.<kind>.v1.<format>, and the
//     older application/vnd.cnai.model.*): a raw layer is the file named by
//     its org.cncf.model.filepath annotation; a tar layer is extracted at
//     the model root, since its entries already carry the file's path (as
//     modctl writes them).
//   - KitOps ModelKits (application/vnd.kitops.modelkit.<type>.v1.tar...):
//     extracted at the model root, or, for ModelKits whose config predates
//     per-layer digests, in the directory of the Kitfile path, as `kit
//     unpack` does.
//   - A layer with an org.opencontainers.image.title annotation (`oras
//     push`): the file named by the title, whatever its media type; a
//     directory oras packed (io.deis.oras.content.unpack) is extracted at
//     the root.
//   - Container image layers: extracted at the model root, in order.
//
// Anything else is an error naming the media type.
//
// Open reads ranges of a blob from the registry, following redirects to
// blob storage without forwarding the registry's credentials there. When
// the registry ignores ranges, the files are marked Sequential.
//
// Credentials come from the environment: OCI_USERNAME and OCI_PASSWORD, or
// OCI_TOKEN (a registry bearer token sent as is), else the docker
// config.json in the DOCKER_CONFIG directory, else none. Registries that
// answer with a Bearer challenge get the token exchange of the distribution
// spec. OCI_INSECURE=true speaks plain HTTP to the registry.
package oci
