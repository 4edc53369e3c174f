package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/webhook"
)

// attack is one replayed attack and what the server answered.
type attack struct {
	name     string
	requests int
	codes    map[string]int
	note     string
}

// codeCounter counts answers by HTTP status, or transport error class.
type codeCounter struct {
	mu    sync.Mutex
	codes map[string]int
	n     int
}

func (c *codeCounter) add(code int, err error) { c.addAnswer(code, err, nil) }

// addAnswer counts an answer; a 200 whose AdmissionReview refuses the
// review is counted by the code inside ("200 with 400 inside").
func (c *codeCounter) addAnswer(code int, err error, body []byte) {
	key := fmt.Sprint(code)
	if err != nil {
		key = "error: " + errorClass(err)
	} else if code == http.StatusOK && body != nil {
		var out admissionv1.AdmissionReview
		if json.Unmarshal(body, &out) == nil && out.Response != nil && !out.Response.Allowed && out.Response.Result != nil {
			key = fmt.Sprintf("200 with %d inside", out.Response.Result.Code)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codes == nil {
		c.codes = map[string]int{}
	}
	c.n++
	c.codes[key]++
}

// attacker replays attacks against one replica's webhook port.
type attacker struct {
	client *http.Client
	base   string
	addr   string
	caData []byte
}

// fire sends n requests, conc at a time; req returns the i-th one's path
// and body.
func (a *attacker) fire(ctx context.Context, n, conc int, req func(i int) (string, []byte)) *codeCounter {
	var cc codeCounter
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				path, body := req(i)
				code, answer, err := post(ctx, a.client, a.base+path, body)
				cc.addAnswer(code, err, answer)
			}
		})
	}
	wg.Wait()
	return &cc
}

// madeUpKinds is the original attack: reviews whose kind is a
// different 1 MB string each time, to /mutate and /validate. Before kinds
// were bounded as metric labels, each one was a new series, held for
// ever.
func (a *attacker) madeUpKinds(ctx context.Context) (attack, error) {
	const n = 60
	bodies := make([][]byte, n)
	for i := range bodies {
		var err error
		bodies[i], err = admissionReview(fmt.Sprintf("kind-%d", i),
			metav1.GroupVersionKind{Group: "evil.example", Version: "v1", Kind: randomString(1 << 20)},
			"things", admissionv1.Create, []byte(`{"metadata":{"name":"x"}}`), nil)
		if err != nil {
			return attack{}, err
		}
	}
	cc := a.fire(ctx, n, 4, func(i int) (string, []byte) {
		return []string{webhook.MutatePath, webhook.ValidatePath}[i%2], bodies[i]
	})
	return attack{name: "60 reviews of made-up 1 MB kinds, 4 at once (/mutate, /validate)", requests: cc.n, codes: cc.codes}, nil
}

// hugeUpdates sends 5 MB UPDATE reviews (an opted-in Deployment of 2.5 MB
// as object and oldObject), many at once.
func (a *attacker) hugeUpdates(ctx context.Context, n, conc int) (attack, error) {
	d := vllmDeployment("huge")
	d.Annotations = map[string]string{"example.com/blob": randomString(5 << 19)}
	raw, err := json.Marshal(d)
	if err != nil {
		return attack{}, fmt.Errorf("encoding the huge Deployment: %w", err)
	}
	body, err := admissionReview("huge", metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "deployments",
		admissionv1.Update, raw, raw)
	if err != nil {
		return attack{}, err
	}
	cc := a.fire(ctx, n, conc, func(i int) (string, []byte) { return []string{webhook.MutatePath, webhook.ValidatePath}[i%2], body })
	return attack{name: fmt.Sprintf("%d UPDATE reviews of %.1f MB (object and oldObject), %d at once (/mutate, /validate)",
		n, float64(len(body))/1e6, conc), requests: cc.n, codes: cc.codes}, nil
}

// oversize sends bodies over the 7 MiB limit, with a Content-Length or
// chunked (no length).
func (a *attacker) oversize(ctx context.Context, n int, chunked bool) attack {
	big := make([]byte, 8<<20)
	copy(big, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"a":"`)
	for i := 100; i < len(big)-4; i++ {
		big[i] = 'a'
	}
	copy(big[len(big)-4:], `"}}}`)
	var cc codeCounter
	for range n {
		var r io.Reader = bytes.NewReader(big)
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+webhook.MutatePath, r)
		if err != nil {
			cc.add(0, err)
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err != nil {
			cc.add(0, err)
			continue
		}
		answer, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cc.addAnswer(resp.StatusCode, err, answer)
	}
	name := "8 MiB bodies with Content-Length"
	if chunked {
		name = "8 MiB bodies chunked (no Content-Length)"
	}
	return attack{name: name, requests: cc.n, codes: cc.codes}
}

// tlsDial opens a TLS connection to the replica as a client would.
func (a *attacker) tlsDial() (*tls.Conn, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.caData)
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", a.addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", a.addr, err)
	}
	return c, nil
}

// slowHeaders holds conns connections that send their request headers a
// byte every few seconds, for hold.
func (a *attacker) slowHeaders(ctx context.Context, conns int, hold time.Duration) attack {
	ctx, cancel := context.WithTimeout(ctx, hold)
	defer cancel()
	var opened, closedByServer atomic.Int64
	var failed codeCounter
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c, err := a.tlsDial()
			if err != nil {
				failed.add(0, err)
				return
			}
			defer c.Close()
			opened.Add(1)
			if _, err := c.Write([]byte("POST /mutate HTTP/1.1\r\nHost: modelgate\r\nX-Slow: ")); err != nil {
				return
			}
			for ctx.Err() == nil {
				sleep(ctx, 2*time.Second)
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write([]byte("a")); err != nil {
					closedByServer.Add(1)
					return
				}
			}
		})
	}
	wg.Wait()
	return attack{name: fmt.Sprintf("slow-loris: %d connections trickling their headers for %s", conns, hold),
		requests: int(opened.Load()), codes: failed.codes,
		note: fmt.Sprintf("%d opened, %d closed by the server while trickling", opened.Load(), closedByServer.Load())}
}

// slowBodies keeps conns connections that declare a body of size and send
// it a byte a second, opening a new one as each is closed, for hold: the
// bodies count against the in-flight budget while they trickle.
func (a *attacker) slowBodies(ctx context.Context, conns int, size int64, hold time.Duration) attack {
	ctx, cancel := context.WithTimeout(ctx, hold)
	defer cancel()
	var opened, answered atomic.Int64
	var cc codeCounter
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := a.tlsDial()
				if err != nil {
					cc.add(0, err)
					sleep(ctx, 100*time.Millisecond)
					continue
				}
				opened.Add(1)
				fmt.Fprintf(c, "POST /validate HTTP/1.1\r\nHost: modelgate\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", size)
				got := make(chan int, 1)
				go func() {
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						got <- 0
						return
					}
					_ = resp.Body.Close()
					got <- resp.StatusCode
				}()
			trickle:
				for ctx.Err() == nil {
					select {
					case code := <-got:
						if code != 0 {
							answered.Add(1)
							cc.add(code, nil)
						}
						break trickle
					case <-time.After(time.Second):
						_ = c.SetWriteDeadline(time.Now().Add(time.Second))
						if _, err := c.Write([]byte(" ")); err != nil {
							break trickle
						}
					}
				}
				_ = c.Close()
			}
		})
	}
	wg.Wait()
	return attack{name: fmt.Sprintf("slow bodies: %d connections declaring %d MiB, sent a byte a second, for %s", conns, size>>20, hold),
		requests: int(opened.Load()), codes: cc.codes,
		note: fmt.Sprintf("%d connections opened, %d answered before the server closed them", opened.Load(), answered.Load())}
}

// probe sends a normal review every interval until ctx ends and counts
// the answers: what the API server's own reviews get meanwhile.
func (a *attacker) probe(ctx context.Context, r review, interval time.Duration) *probeResult {
	pr := &probeResult{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return pr
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		t0 := time.Now()
		code, body, err := post(rctx, a.client, a.base+r.path, r.body)
		took := time.Since(t0)
		cancel()
		pr.add(code, err, body, r, took)
	}
}

// probeResult is what the normal reviews sent during an attack got.
type probeResult struct {
	mu      sync.Mutex
	codes   codeCounter
	slowest time.Duration
	lat     []time.Duration
	wrong   int
}

func (p *probeResult) add(code int, err error, body []byte, r review, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.codes.add(code, err)
	p.lat = append(p.lat, took)
	p.slowest = max(p.slowest, took)
	if err == nil && code == http.StatusOK && r.check(body) != nil {
		p.wrong++
	}
}

func (p *probeResult) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := step{latencies: p.lat}
	return fmt.Sprintf("%d normal reviews: %s; p50 %s, slowest %s%s", p.codes.n, codesString(p.codes.codes),
		s.quantile(0.5).Round(100*time.Microsecond), p.slowest.Round(time.Millisecond),
		map[bool]string{true: fmt.Sprintf(", %d wrong answers", p.wrong), false: ""}[p.wrong > 0])
}

// codesString lists answer counts by status, sorted.
func codesString(codes map[string]int) string {
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, codes[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// randomString is n hex characters.
func randomString(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
