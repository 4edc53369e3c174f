// Command bench-loader measures `modelgate load` (the real binary, as the
// init container runs it) against a floor, side by side in one run: a
// multi-file model from a fake Hugging Face Hub on loopback (LFS files
// through its CDN), loaded by the loader and copied by a plain io.Copy of
// the same bytes from the same server to the same disk (the loader's time
// is until its bytes are on disk: it syncs them before it exits; so is the
// floor's that syncs every file once all are written). It reports
// throughput and the ratios to the floors, the loader's peak RSS against
// its bound (concurrency × part size + 64 MiB), the bytes re-fetched per
// SIGKILL when a load is killed at random points and resumed, and the time
// of a cache hit. `make bench-loader` runs it; --baseline measures a
// second binary (an earlier commit's) in the same rounds, interleaved.
package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
)

func main() {
	var (
		binary   = flag.String("modelgate", "bin/modelgate", "the modelgate binary")
		size     = flag.String("size", "2Gi", "the model's size")
		files    = flag.Int("files", 8, "the model's weight files")
		rounds   = flag.Int("rounds", 3, "measured rounds of each (the median is reported)")
		conc     = flag.Int("concurrency", 16, "the loader's --concurrency")
		part     = flag.String("part-size", "16Mi", "the loader's --part-size")
		kills    = flag.Int("kills", 5, "SIGKILLs of the resume measurement")
		dir      = flag.String("dir", "", "where to write (default: a temporary directory; the same disk for every run)")
		keepDirs = flag.Bool("keep", false, "keep what was written")
		sources  = flag.String("sources", "hf,s3", "the sources measured: hf (a fake Hub, with the resume and cache-hit figures), s3 (an S3 server in process, at GOMAXPROCS 1 and 2)")
		floorRun = flag.Bool("get-floor", false, "internal: the S3 floor's process; GETs each URL argument into --dest")
		floorDir = flag.String("dest", "", "internal: with --get-floor, where to write")
		profile  = flag.String("cpuprofile", "", "the loader's CPU profile (modelgate load --cpuprofile) of its last hf round, and of its last s3 run at GOMAXPROCS=2 (in FILE.s3 when both are measured)")
		baseline = flag.String("baseline", "", "another modelgate binary (an earlier commit's) measured in the same rounds, interleaved with --modelgate")
	)
	flag.Parse()
	if *floorRun {
		if err := getFloor(*floorDir, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "bench-loader --get-floor:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*binary, *baseline, *size, *files, *rounds, *conc, *part, *kills, *dir, *keepDirs, *sources, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "bench-loader:", err)
		os.Exit(1)
	}
}

type bench struct {
	binary, uri, partSize string
	// profile, when set, is where the loader's next run writes its CPU
	// profile.
	profile string
	conc    int
	hub     *hubtest.Server
	model   []hubtest.File
	total   int64
	base    string
}

func run(binary, baseline, size string, nfiles, rounds, conc int, part string, kills int, dir string, keep bool, sources, profile string) error {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	pq, err := resource.ParseQuantity(part)
	if err != nil {
		return fmt.Errorf("--part-size: %w", err)
	}
	base, err := os.MkdirTemp(dir, "bench-loader-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(base)
	}
	srcs := strings.Split(sources, ",")
	if slices.Contains(srcs, "hf") {
		if err := runHF(binary, baseline, q, pq, nfiles, rounds, conc, part, kills, base, profile); err != nil {
			return err
		}
	}
	if slices.Contains(srcs, "s3") {
		if profile != "" && slices.Contains(srcs, "hf") {
			profile += ".s3" // FILE is the hf round's
		}
		return runS3(binary, baseline, q.Value(), nfiles, rounds, conc, part, base, profile)
	}
	return nil
}

// runHF measures the loader on a model from a fake Hub (and the baseline
// binary, when given, in the same rounds).
func runHF(binary, baseline string, q, pq resource.Quantity, nfiles, rounds, conc int, part string, kills int, base, profile string) error {
	b := &bench{binary: binary, uri: "hf://bench/model", partSize: part, conc: conc, hub: hubtest.New(), base: base}
	defer b.hub.Close()
	b.model = append(b.model, hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte(`{"model_type":"llama"}`))})
	per := q.Value() / int64(nfiles)
	for i := range nfiles {
		b.model = append(b.model, hubtest.File{Path: fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, nfiles),
			Content: loadertest.Generated(uint64(i)+1, per), LFS: true})
	}
	for _, f := range b.model {
		b.total += f.Content.Size()
	}
	b.hub.AddRepo("bench/model", hubtest.OneCommit(b.model...))
	fmt.Printf("model: %d files, %s (%s on a fake Hub on loopback; LFS files through its CDN)\n",
		len(b.model), loader.HumanBytes(b.total), b.uri)
	fmt.Printf("loader: %s load --concurrency=%d --part-size=%s; %d rounds, median\n", binary, conc, part, rounds)
	if baseline != "" {
		fmt.Printf("baseline: %s, interleaved with the loader in every round\n", baseline)
	}
	fmt.Println()

	var floor, floorEnd, floorSync, floorHash []time.Duration
	var load, old []runStats
	for r := range rounds {
		for _, x := range []struct {
			kind floorKind
			out  *[]time.Duration
		}{{floorCopy, &floor}, {floorSyncAtEnd, &floorEnd}, {floorSyncEach, &floorSync}, {floorSyncHash, &floorHash}} {
			d, err := b.floor(fmt.Sprintf("floor-%d-%d", x.kind, r), x.kind)
			if err != nil {
				return err
			}
			*x.out = append(*x.out, d)
		}
		// The baseline first in even rounds and second in odd ones: neither
		// always runs on the page cache and writeback the other left.
		runs := []struct {
			bin string
			out *[]runStats
		}{{binary, &load}, {baseline, &old}}
		if r%2 == 0 {
			runs[0], runs[1] = runs[1], runs[0]
		}
		for _, x := range runs {
			if x.bin == "" {
				continue
			}
			if x.bin == binary && r == rounds-1 {
				b.profile = profile
			}
			m, err := b.load(fmt.Sprintf("load-%d", r), x.bin)
			b.profile = ""
			if err != nil {
				return err
			}
			*x.out = append(*x.out, m)
		}
	}
	hit, err := b.loadInto(filepath.Join(base, "load-0-kept"), binary)
	if err != nil {
		return err
	}
	f, fe, fs, fh := median(floor), median(floorEnd), median(floorSync), median(floorHash)
	bound := int64(conc)*pq.Value() + 64<<20
	gb := float64(b.total) / 1e9
	fmt.Printf("%-38s %9s %12s %8s %10s %10s %10s\n", "", "time", "throughput", "ratio", "to synced", "CPU s/GB", "peak RSS")
	row := func(name string, d time.Duration, cpu string, rss string) {
		fmt.Printf("%-38s %8.2fs %10s/s %7.2fx %9.2fx %10s %10s\n", name, d.Seconds(), loader.HumanBytes(int64(float64(b.total)/d.Seconds())),
			f.Seconds()/d.Seconds(), fe.Seconds()/d.Seconds(), cpu, rss)
	}
	loadRow := func(name string, runs []runStats) {
		m := medianBy(runs, runStats.wallTime)
		rss := slices.MaxFunc(runs, func(a, b runStats) int { return cmp.Compare(a.rss, b.rss) }).rss
		row(name, m.wall, fmt.Sprintf("%.2f", m.cpu.Seconds()/gb), fmt.Sprintf("%d MiB", rss>>20))
	}
	row("floor: io.Copy per file", f, "", "")
	row("floor: + fsync of every file at the end", fe, "", "")
	row("floor: io.Copy per file + fsync", fs, "", "")
	row("floor: + sha256 of each file", fh, "", "")
	if baseline != "" {
		loadRow("baseline: modelgate load", old)
	}
	loadRow("modelgate load (until on disk)", load)
	rss := slices.MaxFunc(load, func(a, b runStats) int { return cmp.Compare(a.rss, b.rss) }).rss
	fmt.Printf("\npeak RSS of the loader: %d MiB; bound (concurrency × part size + 64 MiB): %d MiB\n", rss>>20, bound>>20)
	if h := load[len(load)-1].hashing; h != "" {
		fmt.Printf("how the loader's last round hashed: %s\n", h)
	}
	fmt.Printf("cache hit (manifest present): %.3f s for the whole process\n", hit.wall.Seconds())
	return b.killed(kills)
}

// floor copies every file of the model with one GET and one io.Copy each,
// as a plain client would; how says what it also does: fsync each file
// after it is written, or only once all are (the bytes on disk, at the
// disk's pace with nothing else to wait for), and hash each file (the work
// the loader cannot skip: durability and verification).
func (b *bench) floor(name string, how floorKind) (time.Duration, error) {
	dest := filepath.Join(b.base, name)
	if err := os.MkdirAll(dest, 0o755); err != nil { //nolint:gosec // a benchmark scratch directory
		return 0, err
	}
	defer os.RemoveAll(dest)
	client := &http.Client{}
	commit := hubtest.OneCommit(b.model...).Refs["main"]
	var written []*os.File
	defer func() {
		for _, f := range written {
			_ = f.Close()
		}
	}()
	start := time.Now()
	for _, f := range b.model {
		resp, err := client.Get(b.hub.URL() + "/bench/model/resolve/" + commit + "/" + f.Path)
		if err != nil {
			return 0, err
		}
		out, err := os.Create(filepath.Join(dest, filepath.Base(f.Path))) //nolint:gosec // a file the benchmark itself created
		if err != nil {
			return 0, err
		}
		written = append(written, out)
		var w io.Writer = out
		if how == floorSyncHash {
			w = io.MultiWriter(out, sha256.New())
		}
		if _, err := io.Copy(w, resp.Body); err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		if how == floorSyncEach || how == floorSyncHash {
			if err := out.Sync(); err != nil {
				return 0, err
			}
		}
	}
	if how == floorSyncAtEnd {
		for _, f := range written {
			if err := f.Sync(); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// floorKind is what a floor does besides copying.
type floorKind int

const (
	floorCopy      floorKind = iota // nothing: the bytes are in the page cache
	floorSyncAtEnd                  // fsync every file once all are written
	floorSyncEach                   // fsync each file after it is written
	floorSyncHash                   // fsync and SHA-256 each file
)

// load runs a loader binary into a new directory and removes it after
// (the first round's is kept, for the cache hit).
func (b *bench) load(name, binary string) (runStats, error) {
	dest := filepath.Join(b.base, name)
	defer func() {
		if name != "load-0" || binary != b.binary {
			_ = os.RemoveAll(dest)
		} else {
			_ = os.Rename(dest, dest+"-kept")
		}
	}()
	return b.loadInto(dest, binary)
}

func (b *bench) command(dest, binary string) *exec.Cmd {
	cmd := exec.Command(binary, "load", "--uri="+b.uri, "--dest="+dest, //nolint:gosec // the modelgate binary under test, named by a flag
		fmt.Sprintf("--concurrency=%d", b.conc), "--part-size="+b.partSize, "--termination-log=", "--log-format=text")
	if b.profile != "" {
		cmd.Args = append(cmd.Args, "--cpuprofile="+b.profile)
	}
	cmd.Env = append(os.Environ(), "HF_ENDPOINT="+b.hub.URL())
	return cmd
}

// loadInto runs a loader binary to completion: its time until it exited
// with every byte on disk, its CPU time and its peak RSS.
func (b *bench) loadInto(dest, binary string) (runStats, error) {
	return watch(b.command(dest, binary))
}

// killed SIGKILLs a load at random points, resuming each time, and
// reports the bytes fetched again.
func (b *bench) killed(kills int) error {
	if kills == 0 {
		return nil
	}
	dest := filepath.Join(b.base, "killed")
	defer os.RemoveAll(dest)
	// Kill points spread over a typical load's duration.
	t, err := b.loadInto(filepath.Join(b.base, "timing"), b.binary)
	if err != nil {
		return err
	}
	d := t.wall
	_ = os.RemoveAll(filepath.Join(b.base, "timing"))
	before := b.hub.BytesServed()
	r := rand.New(rand.NewPCG(7, 11)) //nolint:gosec // a schedule, not a secret
	var lost, dropped int64
	for range kills {
		safe, servedBefore := onDisk(dest), b.hub.BytesServed()
		cmd := b.command(dest, b.binary)
		if err := cmd.Start(); err != nil {
			return err
		}
		time.Sleep(time.Duration(float64(d) * (0.1 + 0.5*r.Float64()) / float64(kills) * 2))
		wrote := writtenBy(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		kept := onDisk(dest) - safe
		// What the server sent in the run and the run did not keep (bytes
		// still in socket buffers count as sent), and what the loader
		// itself wrote to disk and its checkpoints did not record.
		lost += (b.hub.BytesServed() - servedBefore) - kept
		dropped += wrote - kept
	}
	if _, err := b.loadInto(dest, b.binary); err != nil {
		return err
	}
	served := b.hub.BytesServed() - before
	extra := served - b.total
	fmt.Printf("resume: %d SIGKILLs at random points, then a run to the end: %s served for a %s model, %s re-fetched in all, %s per kill\n",
		kills, loader.HumanBytes(served), loader.HumanBytes(b.total), loader.HumanBytes(max(extra, 0)), loader.HumanBytes(max(extra, 0)/int64(kills)))
	fmt.Printf("        sent by the server in a killed run and not kept: %s per kill; written by the loader and not recorded: %s per kill\n",
		loader.HumanBytes(max(lost, 0)/int64(kills)), loader.HumanBytes(max(dropped, 0)/int64(kills)))
	return nil
}

// writtenBy is the bytes a process wrote so far (wchar of /proc/<pid>/io:
// the model's bytes, and its small checkpoints and requests).
func writtenBy(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return n
}

// onDisk is what a resumed load keeps of dest: finished files and, from
// the checkpoints, the parts and part prefixes recorded.
func onDisk(dest string) int64 {
	var n int64
	done, _ := filepath.Glob(filepath.Join(dest, loader.StateDir, "done", "*.json"))
	for _, p := range done {
		var d struct{ Files []struct{ Size int64 } }
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &d) == nil { //nolint:gosec // the loader state files the benchmark reads back
			for _, f := range d.Files {
				n += f.Size
			}
		}
	}
	cks, _ := filepath.Glob(filepath.Join(dest, loader.StateDir, "partial", "*.json"))
	for _, p := range cks {
		var c struct {
			Size, PartSize int64
			Done           []byte
			Partial        map[int]int64
		}
		b, err := os.ReadFile(p) //nolint:gosec // the loader state files the benchmark reads back
		if err != nil || json.Unmarshal(b, &c) != nil || c.PartSize <= 0 {
			continue
		}
		for i := int64(0); i*c.PartSize < c.Size; i++ {
			if int(i/8) < len(c.Done) && c.Done[i/8]&(1<<(i%8)) != 0 {
				n += min(c.PartSize, c.Size-i*c.PartSize)
			}
		}
		for _, g := range c.Partial {
			n += g
		}
	}
	return n
}

func median(ds []time.Duration) time.Duration {
	return medianBy(ds, func(d time.Duration) time.Duration { return d })
}

// medianBy is the element of xs with the median key.
func medianBy[T any](xs []T, key func(T) time.Duration) T {
	s := slices.Clone(xs)
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return s[len(s)/2]
}

// tail keeps the last 16 KiB of a process's output.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 16<<10 {
		t.b = t.b[len(t.b)-16<<10:]
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }

var _ = context.Background
