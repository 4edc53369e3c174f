// Package loadertest serves a model's files over HTTP with ranges and
// faults, for the loader's tests and benchmarks: a real server on
// loopback, and a loader.Source reading from it the way the schemes do.
package loadertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the server does to the next matching requests.
type Fault struct {
	// Path limits the fault to one file ("" = any file).
	Path string
	// Times is how many requests it applies to (0 = every one).
	Times int
	// Status answers with this HTTP status instead of content, with
	// RetryAfter seconds when set.
	Status     int
	RetryAfter int
	// CutAfter closes the connection after this many body bytes.
	CutAfter int64
	// Stall stops sending after CutAfter bytes (0 = at once) for this
	// long, then cuts.
	Stall time.Duration
	// Corrupt flips the byte at file offset CorruptAt when it is served.
	Corrupt   bool
	CorruptAt int64
}

// Server serves files at /files/<path> with Range support and a listing
// at /index.
type Server struct {
	srv *httptest.Server

	mu     sync.Mutex
	files  map[string]Content
	sums   map[string][2]string
	faults []*faultState
	// Rate, when set, limits each response to this many bytes per second.
	rate atomic.Int64

	requests    atomic.Int64
	bytesServed atomic.Int64
}

type faultState struct {
	Fault
	left int
}

// Entry is one file in the index.
type Entry struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// CRC64NVME is listed instead of SHA256 by a Source whose Digest
	// asks for it.
	CRC64NVME string `json:"crc64nvme,omitempty"`
}

// NewServer starts a server for files (path → content); Close stops it.
func NewServer(files map[string]Content) *Server {
	s := &Server{files: files}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client is a client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	s.faults = append(s.faults, &faultState{Fault: f, left: f.Times})
	s.mu.Unlock()
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}

// SetRate limits every response to bytesPerSecond (0 = no limit).
func (s *Server) SetRate(bytesPerSecond int64) { s.rate.Store(bytesPerSecond) }

// Requests is the number of requests for file content so far.
func (s *Server) Requests() int64 { return s.requests.Load() }

// BytesServed is the number of content bytes sent so far.
func (s *Server) BytesServed() int64 { return s.bytesServed.Load() }

// Index lists the files with their sizes and digests (computed once).
func (s *Server) Index() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sums == nil {
		s.sums = map[string][2]string{}
	}
	out := make([]Entry, 0, len(s.files))
	for p, c := range s.files {
		sum, ok := s.sums[p]
		if !ok {
			sum = [2]string{c.SHA256(), c.CRC64NVME()}
			s.sums[p] = sum
		}
		out = append(out, Entry{Path: p, Size: c.Size(), SHA256: sum[0], CRC64NVME: sum[1]})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/index" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Index())
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/files/")
	s.mu.Lock()
	c, found := s.files[name]
	s.mu.Unlock()
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	s.requests.Add(1)
	off, end, ranged := parseRange(r.Header.Get("Range"), c.Size())
	if f := s.fault(name); f != nil {
		if f.Status != 0 {
			if f.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
			}
			http.Error(w, http.StatusText(f.Status), f.Status)
			return
		}
		s.write(w, c, off, end, ranged, f)
		return
	}
	s.write(w, c, off, end, ranged, nil)
}

func (s *Server) fault(name string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Path != "" && f.Path != name {
			continue
		}
		if f.Times > 0 {
			f.left--
			if f.left <= 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		cp := f.Fault
		return &cp
	}
	return nil
}

// parseRange reads "bytes=a-b" (the one form the loader sends).
func parseRange(h string, size int64) (off, end int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return 0, size - 1, false
	}
	a, b, _ := strings.Cut(spec, "-")
	off, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || off >= size {
		return 0, size - 1, false
	}
	if err2 != nil || end >= size {
		end = size - 1
	}
	return off, end, true
}

func (s *Server) write(w http.ResponseWriter, c Content, off, end int64, ranged bool, f *Fault) {
	n := end - off + 1
	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	h.Set("Content-Type", "application/octet-stream")
	if ranged {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, end, c.Size()))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	limit := n
	if f != nil && (f.CutAfter > 0 || f.Stall > 0) {
		limit = min(n, f.CutAfter)
	}
	buf := make([]byte, 256<<10)
	sent := int64(0)
	start := time.Now()
	for sent < limit {
		k := min(int64(len(buf)), limit-sent)
		if _, err := c.ReadAt(buf[:k], off+sent); err != nil && int64(len(buf[:k])) != k {
			return
		}
		if f != nil && f.Corrupt && f.CorruptAt >= off+sent && f.CorruptAt < off+sent+k {
			buf[f.CorruptAt-off-sent] ^= 0xff
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		sent += k
		s.bytesServed.Add(k)
		if rate := s.rate.Load(); rate > 0 {
			if ahead := time.Duration(float64(sent)/float64(rate)*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	if f != nil && f.Stall > 0 {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		time.Sleep(f.Stall)
	}
	if sent < n {
		panic(http.ErrAbortHandler) // cut the connection mid-body
	}
}
