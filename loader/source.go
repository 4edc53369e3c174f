package loader

import (
	"context"
	"io"
	"slices"
)

// Source is one model at one URI: it lists the model's files and reads
// byte ranges of them. Schemes implement it in their own packages.
type Source interface {
	// List resolves the model to a fixed version (a commit, a manifest
	// digest, object generations) and lists its files. An empty listing
	// is an error wrapping ErrNotFound.
	List(ctx context.Context) (*Listing, error)
	// Open returns the bytes [off, off+n) of f, n > 0. The reader yields
	// exactly n bytes or fails; the loader retries transient failures
	// (see Transient). Open is called concurrently.
	Open(ctx context.Context, f *File, off, n int64) (io.ReadCloser, error)
}

// Listing is a model resolved to a fixed version.
type Listing struct {
	// Revision is the version the files were listed at: a commit, a
	// manifest digest, "etag-of-the-file"; shown in the manifest and the
	// termination message. May be empty when the source has none.
	Revision string
	// Files are the files to fetch. Their Paths are distinct.
	Files []File
	// HF, when set, lays the model out as a Hugging Face hub cache.
	HF *HFRepo
}

// HFRepo names a Hugging Face repository for the hub cache layout.
type HFRepo struct {
	// ID is "org/name".
	ID string `json:"id"`
	// Ref is the revision the user asked for ("main" when none): written
	// to refs/<Ref> when it is not the commit itself.
	Ref string `json:"ref"`
	// Commit is the 40-hex commit the revision resolved to.
	Commit string `json:"commit"`
}

// File is one file of a model as its source lists it.
type File struct {
	// Path is where the file goes, relative to the model root: slash
	// separated. The loader checks it with CleanPath; a source never needs
	// to trust or clean keys itself, but may reject them earlier.
	Path string
	// Size is the file's length in bytes.
	Size int64
	// Digests are what the source vouches for; the loader verifies every
	// one whose Algorithm it knows and fails on a mismatch.
	Digests []Digest
	// Composite, when set, is a digest of the parts of a multipart
	// upload, verified part by part (see Composite); the source sets it
	// when it vouches for nothing of the whole file.
	Composite *Composite
	// Version identifies the content (an ETag, a generation, a blob
	// digest). A partial download of another Version is never resumed.
	Version string
	// Key is the source's own name for the file (an object key, a URL, a
	// blob digest); only the Source reads it.
	Key string
	// Sequential says the source cannot serve ranges of this file: it is
	// read in one request from the start, and a cut restarts it.
	Sequential bool
	// Unpack, when not ArchiveNone, says the file is an archive whose
	// entries are extracted under Path (a directory, "" for the model
	// root) instead of the file itself being kept.
	Unpack Archive
}

// Archive is the format of a file to extract.
type Archive string

// The archive formats Load extracts.
const (
	ArchiveNone    Archive = ""
	ArchiveTar     Archive = "tar"
	ArchiveTarGzip Archive = "tar+gzip"
	ArchiveTarZstd Archive = "tar+zstd"
)

// Composite is a digest over the digests of a multipart upload's parts:
// Algorithm applied to the concatenation of each part's raw Algorithm
// digest, in order. It is how S3 names a multipart object's ETag (MD5)
// and its COMPOSITE checksums. The parts are PartSize bytes each but the
// last; the loader fetches the file in exactly those parts, computes each
// part's digest as its bytes arrive, and checks the digest of digests.
type Composite struct {
	Algorithm Algorithm
	// Hex is the digest of the parts' digests, lower-case hex.
	Hex      string
	Parts    int
	PartSize int64
}

// Valid reports whether the composite describes a file of size bytes:
// Parts parts of PartSize, the last holding at least one byte.
func (c *Composite) Valid(size int64) bool {
	return c != nil && c.Parts > 0 && c.PartSize > 0 && size > 0 &&
		int64(c.Parts) == (size+c.PartSize-1)/c.PartSize && c.Hex != "" &&
		slices.Contains(known, c.Algorithm) && c.Algorithm != GitSHA1
}

// Digest is a checksum of a file's whole content, as lower-case hex.
type Digest struct {
	Algorithm Algorithm `json:"algorithm"`
	Hex       string    `json:"hex"`
}

// Algorithm names a checksum.
type Algorithm string

// The checksums Load verifies.
const (
	// SHA256 is the SHA-256 of the content: HF LFS files, OCI blobs,
	// https digests, S3's full-object checksum.
	SHA256 Algorithm = "sha256"
	// GitSHA1 is git's blob hash, SHA-1 of "blob <size>\x00" and the
	// content: HF files not stored in LFS.
	GitSHA1 Algorithm = "git-sha1"
	// MD5 is the MD5 of the content: GCS md5Hash, the ETag of an S3
	// object uploaded in one part.
	MD5 Algorithm = "md5"
	// CRC32C is the Castagnoli CRC-32 of the content, big-endian: GCS
	// crc32c, S3's full-object CRC32C checksum.
	CRC32C Algorithm = "crc32c"
	// CRC64NVME is the NVMe CRC-64 of the content, big-endian: the
	// full-object checksum S3 computes for every new upload.
	CRC64NVME Algorithm = "crc64nvme"
	// CRC32 is the IEEE CRC-32 of the content, big-endian: S3's
	// full-object CRC32 checksum.
	CRC32 Algorithm = "crc32"
	// SHA1 is the SHA-1 of the content: S3's full-object SHA-1 checksum.
	SHA1 Algorithm = "sha1"
)
