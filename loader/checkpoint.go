package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"strconv"
)

// Directories inside StateDir.
const (
	partialDir  = StateDir + "/partial"
	doneDir     = StateDir + "/done"
	verifiedDir = StateDir + "/verified"
)

// fileID names a file's partial download and records: the same path, size,
// version and key always map to the same id, and another version of the
// file to another.
func fileID(f *File) string {
	h := sha256.New()
	for _, s := range []string{f.Path, f.Version, f.Key, string(f.Unpack), strconv.FormatInt(f.Size, 10)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func partialName(id string) string    { return path.Join(partialDir, id+".part") }
func checkpointName(id string) string { return path.Join(partialDir, id+".json") }
func doneName(id string) string       { return path.Join(doneDir, id+".json") }

// stagedName is where a verified file waits until every file is verified:
// verified/<id> for a file, verified/<id>/<path> for what an archive held.
func stagedName(id string, archive bool, f LoadedFile) string {
	if archive {
		return path.Join(verifiedDir, id, f.Path)
	}
	return path.Join(verifiedDir, id)
}

// checkpoint is what survives a kill of a partial download: the parts
// whose bytes were synced to disk, and the hashes' state over the
// contiguous prefix hashed so far.
type checkpoint struct {
	ID       string `json:"id"`
	Size     int64  `json:"size"`
	PartSize int64  `json:"partSize"`
	// Done is a bit set of the parts on disk.
	Done []byte `json:"done"`
	// Partial is, for parts not done, the length of their prefix on disk.
	Partial map[int]int64 `json:"partial,omitempty"`
	// Hashed is the length of the prefix HashState covers.
	Hashed    int64                `json:"hashed"`
	HashState map[Algorithm][]byte `json:"hashState,omitempty"`
}

func readCheckpoint(root *os.Root, id string) (*checkpoint, error) {
	b, err := root.ReadFile(checkpointName(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, nil //nolint:nilerr // a torn checkpoint is no checkpoint: start the file again
	}
	return &c, nil
}

func writeCheckpoint(root *os.Root, c *checkpoint) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return writeFileAtomic(root, checkpointName(c.ID), b)
}

// doneRecord is written when a file is verified and in its final place,
// so that a resumed load skips it.
type doneRecord struct {
	ID      string       `json:"id"`
	Archive bool         `json:"archive,omitempty"`
	Files   []LoadedFile `json:"files"`
}

func readDone(root *os.Root, id string) *doneRecord {
	b, err := root.ReadFile(doneName(id))
	if err != nil {
		return nil
	}
	var d doneRecord
	if json.Unmarshal(b, &d) != nil || d.ID != id {
		return nil
	}
	return &d
}

func writeDone(root *os.Root, d *doneRecord) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return writeFileAtomic(root, doneName(d.ID), b)
}

// bitset helpers for checkpoint.Done.
func setBits(done []bool) []byte {
	b := make([]byte, (len(done)+7)/8)
	for i, d := range done {
		if d {
			b[i/8] |= 1 << (i % 8)
		}
	}
	return b
}

func getBits(b []byte, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		if i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0 {
			out[i] = true
		}
	}
	return out
}
