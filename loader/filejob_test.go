package loader

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestResumeFromCheckpoint: a checkpoint's parts and part prefixes become
// what is left to fetch; a part recorded whole (killed before it was
// marked done) is done.
func TestResumeFromCheckpoint(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.MkdirAll(partialDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &File{Path: "m.bin", Size: 4*100 + 50, Version: "v1"}
	id := fileID(f)
	// An earlier run: the preallocated file and its checkpoint.
	if err := root.WriteFile(partialName(id), make([]byte, f.Size), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := &checkpoint{ID: id, Size: f.Size, PartSize: 100, Done: setBits([]bool{true, false, false, false, false}),
		Partial: map[int]int64{1: 100, 2: 30, 4: 7, 9: 5, -1: 3}}
	if err := writeCheckpoint(root, ck); err != nil {
		t.Fatal(err)
	}
	j := newFileJob(f, id, "m.bin", 100)
	todo, have, err := j.open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	type left struct{ Idx, Off, N, Skip int64 }
	var got []left
	for _, p := range todo {
		got = append(got, left{int64(p.idx), p.off, p.n, p.skip})
	}
	want := []left{{2, 200, 100, 30}, {3, 300, 100, 0}, {4, 400, 50, 7}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parts left (-want +got):\n%s", diff)
	}
	if have != 100+100+30+7 {
		t.Errorf("bytes kept = %d, want %d", have, 237)
	}

	// A partial file of another size is not trusted.
	if err := root.WriteFile(partialName(id), make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	j2 := newFileJob(f, id, "m.bin", 100)
	todo, have, err = j2.open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.close()
	if len(todo) != 5 || have != 0 {
		t.Errorf("with a partial file of the wrong size: %d parts left, %d bytes kept; want 5 and 0", len(todo), have)
	}
}
