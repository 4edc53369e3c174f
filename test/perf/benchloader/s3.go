package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/minio/crc64nvme"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// s3Bucket is the bucket of the S3 benchmark's model.
const s3Bucket = "bench-models"

// s3Bench serves a model from an S3 server in this process (gofakes3, in
// memory, on loopback), each object with the full-object CRC64NVME
// checksum S3 computes for every new upload, and its MD5 ETag.
type s3Bench struct {
	partSize string
	// profile, when set, is where the loader's last run writes its CPU
	// profile (--cpuprofile).
	profile string
	conc    int
	srv     *httptest.Server
	keys    []string
	total   int64
	served  atomic.Int64
	base    string
}

// runStats is one measured run: until the process exited with every byte on
// disk, and what it cost.
type runStats struct {
	wall time.Duration
	cpu  time.Duration
	rss  int64
	// hashing is the loader's "hashed in order" line, when it logged one:
	// how the bytes reached their hashes.
	hashing string
}

func (r runStats) wallTime() time.Duration { return r.wall }

func runS3(binary, baseline string, size int64, nfiles, rounds, conc int, part, base, profile string) error {
	b := &s3Bench{partSize: part, conc: conc, base: base}
	backend := s3mem.New()
	if err := backend.CreateBucket(s3Bucket); err != nil {
		return err
	}
	per := size / int64(nfiles)
	for i := range nfiles {
		key := fmt.Sprintf("bench/model/model-%05d-of-%05d.safetensors", i+1, nfiles)
		c := loadertest.Generated(uint64(i)+101, per)
		sum := crc64nvme.New()
		if _, err := io.Copy(sum, c.Reader()); err != nil {
			return err
		}
		meta := map[string]string{
			"Last-Modified":            time.Now().UTC().Format(http.TimeFormat),
			"X-Amz-Checksum-Crc64nvme": base64.StdEncoding.EncodeToString(sum.Sum(nil)),
			"X-Amz-Checksum-Type":      "FULL_OBJECT",
		}
		if _, err := backend.PutObject(s3Bucket, key, meta, c.Reader(), c.Size(), nil); err != nil {
			return err
		}
		b.keys = append(b.keys, key)
		b.total += c.Size()
	}
	s3 := gofakes3.New(backend).Server()
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s3.ServeHTTP(&countingWriter{ResponseWriter: w, n: &b.served}, r)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b.srv.Listener = l
	b.srv.Start()
	defer b.srv.Close()

	fmt.Printf("\nS3: %d objects, %s from an S3 server in process on loopback (gofakes3, in memory), each with a full-object CRC64NVME checksum and an MD5 ETag\n",
		len(b.keys), loader.HumanBytes(b.total))
	fmt.Printf("floor: one plain GET of each object after the other, written to disk and fsynced (%s --get-floor)\n", filepath.Base(os.Args[0]))
	fmt.Printf("loader: %s load --uri=s3://%s/bench/model --dest=DIR --concurrency=%d --part-size=%s; page cache dropped before each run when root; %d rounds, median\n\n",
		binary, s3Bucket, conc, part, rounds)
	if baseline != "" {
		fmt.Printf("baseline: %s, interleaved with the loader in every round\n\n", baseline)
	}
	fmt.Printf("%-12s %-26s %9s %12s %8s %10s %10s\n", "GOMAXPROCS", "", "on disk", "throughput", "ratio", "CPU s/GB", "peak RSS")
	for _, procs := range []int{1, 2} {
		var floors, loads, old []runStats
		for r := range rounds {
			f, err := b.floor(fmt.Sprintf("s3-floor-%d-%d", procs, r), procs)
			if err != nil {
				return err
			}
			floors = append(floors, f)
			runs := []struct {
				bin string
				out *[]runStats
			}{{binary, &loads}, {baseline, &old}}
			if r%2 == 0 {
				runs[0], runs[1] = runs[1], runs[0]
			}
			for _, x := range runs {
				if x.bin == "" {
					continue
				}
				if x.bin == binary && procs == 2 && r == rounds-1 {
					b.profile = profile
				}
				l, err := b.load(fmt.Sprintf("s3-load-%d-%d", procs, r), x.bin, procs)
				b.profile = ""
				if err != nil {
					return err
				}
				*x.out = append(*x.out, l)
			}
		}
		f, l := medianBy(floors, runStats.wallTime), medianBy(loads, runStats.wallTime)
		gb := float64(b.total) / 1e9
		row := func(name string, r runStats) {
			fmt.Printf("%-12d %-26s %8.2fs %10s/s %7.2fx %10.2f %7d MiB\n", procs, name, r.wall.Seconds(),
				loader.HumanBytes(int64(float64(b.total)/r.wall.Seconds())), f.wall.Seconds()/r.wall.Seconds(), r.cpu.Seconds()/gb, r.rss>>20)
		}
		row("floor: GET + fsync", f)
		if baseline != "" {
			row("baseline: modelgate load", medianBy(old, runStats.wallTime))
		}
		row("modelgate load", l)
	}
	return nil
}

// floor runs this program's --get-floor in a process of its own, so that
// its CPU and memory are its own.
func (b *s3Bench) floor(name string, procs int) (runStats, error) {
	dest := filepath.Join(b.base, name)
	defer os.RemoveAll(dest)
	self, err := os.Executable()
	if err != nil {
		return runStats{}, err
	}
	args := []string{"--get-floor", "--dest", dest}
	for _, k := range b.keys {
		args = append(args, b.srv.URL+"/"+s3Bucket+"/"+k)
	}
	return b.measure(exec.Command(self, args...), procs) //nolint:gosec // this program, re-run
}

// load runs a loader binary into a new directory and removes it after.
func (b *s3Bench) load(name, binary string, procs int) (runStats, error) {
	dest := filepath.Join(b.base, name)
	defer os.RemoveAll(dest)
	cmd := exec.Command(binary, "load", "--uri=s3://"+s3Bucket+"/bench/model", "--dest="+dest, //nolint:gosec // the modelgate binary under test, named by a flag
		fmt.Sprintf("--concurrency=%d", b.conc), "--part-size="+b.partSize, "--termination-log=", "--log-format=text")
	if b.profile != "" {
		cmd.Args = append(cmd.Args, "--cpuprofile="+b.profile)
	}
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_S3="+b.srv.URL, "AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench-secret",
		"AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
	return b.measure(cmd, procs)
}

// measure drops the page cache (as root), runs cmd with GOMAXPROCS=procs
// and returns its wall time, CPU time (user + system) and peak RSS.
func (b *s3Bench) measure(cmd *exec.Cmd, procs int) (runStats, error) {
	dropCaches()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", procs))
	return watch(cmd)
}

// watch runs cmd and returns its wall time, CPU time (user + system) and
// peak RSS.
func watch(cmd *exec.Cmd) (runStats, error) {
	out := &tail{}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return runStats{}, err
	}
	// The peak RSS is read from /proc while the process runs: its rusage
	// counts this process's memory (the S3 server's objects) too, which
	// the child shared until it exec'd.
	var hwm atomic.Int64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := vmHWM(cmd.Process.Pid); v > hwm.Load() {
				hwm.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	if err != nil {
		return runStats{}, fmt.Errorf("%s: %w\n%s", filepath.Base(cmd.Path), err, out)
	}
	r := runStats{wall: time.Since(start), rss: hwm.Load()}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.Contains(line, `"hashed in order"`) {
			r.hashing = line
		}
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return r, nil
}

// vmHWM is a process's peak resident set so far (VmHWM), 0 when it is
// gone.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// getFloor is the floor's process: each URL with one GET, after the other,
// copied to a file in dest and fsynced.
func getFloor(dest string, urls []string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil { //nolint:gosec // a benchmark scratch directory
		return err
	}
	for i, u := range urls {
		resp, err := http.Get(u) //nolint:gosec,noctx // a loopback server the benchmark started
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		f, err := os.Create(filepath.Join(dest, fmt.Sprintf("%d", i))) //nolint:gosec // a file the benchmark itself creates
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			return err
		}
		_ = resp.Body.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// dropCaches empties the page cache, so that every run writes to a cold
// one; it does nothing unless root.
func dropCaches() {
	syscall.Sync()
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200)
}

// countingWriter counts the bytes a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}
