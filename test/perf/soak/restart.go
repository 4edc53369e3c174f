package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// restartMode is how a replica is stopped in a rolling restart.
type restartMode struct {
	name string
	// deleted is a Pod deletion as Kubernetes does it: the replica leaves
	// the Service's endpoints as it gets SIGTERM (config/manager has no
	// preStop hook: modelgate drains on its own, drainPeriod). Otherwise
	// only its failing /readyz takes it out of rotation.
	deleted bool
}

// restartResult is one rolling restart under load.
type restartResult struct {
	mode restartMode
	// drainPeriod is the replicas' Configuration's.
	drainPeriod time.Duration
	elapsed     time.Duration
	ops         map[string]*opCount
	failures    failures
	events      []string
	exits       []string
	lb          string
}

// opCount is the writes of one kind sent through the API server.
type opCount struct{ total, failed int }

// traffic writes opted-in objects through the API server as the developer,
// from workers in a loop: each creates a vLLM Deployment, updates its pod
// template, creates a GPU Pod and a v1alpha1 AIInference (conversion,
// defaulting and validation), then deletes the three.
type traffic struct {
	c client.Client
	// prefix keeps each run's object names apart from the last's, whose
	// failed deletes may have left objects behind.
	prefix   string
	mu       sync.Mutex
	ops      map[string]*opCount
	failures *failures
	log      *timeline
}

func (t *traffic) count(op string, err error) {
	t.mu.Lock()
	oc := t.ops[op]
	if oc == nil {
		oc = &opCount{}
		t.ops[op] = oc
	}
	oc.total++
	if err != nil {
		oc.failed++
	}
	t.mu.Unlock()
	if err != nil {
		cause := apiErrorCause(err)
		t.failures.add(cause, fmt.Sprintf("%s: %v", op, err))
		t.log.add("FAILED %s: %s", op, cause)
	}
}

// loop runs one worker until ctx ends.
func (t *traffic) loop(ctx context.Context, worker int) {
	bg := context.WithoutCancel(ctx)
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s-w%d-%d", t.prefix, worker, i)
		d := vllmDeployment("llm-" + name)
		err := t.c.Create(bg, d)
		t.count("create Deployment", err)
		if err == nil {
			d.Spec.Template.Annotations["soak.example.com/iteration"] = name
			t.count("update Deployment", t.c.Update(bg, d))
		}
		p := notebookPod("nb-" + name)
		perr := t.c.Create(bg, p)
		t.count("create Pod", perr)
		a := alphaUnstructured("llama-" + name)
		aerr := t.c.Create(bg, a)
		t.count("create AIInference v1alpha1", aerr)
		if err == nil {
			t.count("delete Deployment", t.c.Delete(bg, d))
		}
		if perr == nil {
			t.count("delete Pod", t.c.Delete(bg, p, client.GracePeriodSeconds(0)))
		}
		if aerr == nil {
			t.count("delete AIInference v1alpha1", t.c.Delete(bg, a))
		}
	}
}

// alphaUnstructured is a v1alpha1 AIInference for the API server, which
// converts it through the conversion webhook before admission and storage.
func alphaUnstructured(name string) *unstructured.Unstructured {
	a := alphaInference(0)
	a.Name, a.UID, a.ResourceVersion = name, "", ""
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
	if err != nil {
		panic(err) // a typed object always converts
	}
	return &unstructured.Unstructured{Object: m}
}

// rollingRestart restarts replicas one after the other under traffic:
// stop (per mode), start again, wait until the balancer routes to it
// again, settle, next.
func rollingRestart(ctx context.Context, cp *controlPlane, lb *balancer, replicas []*replica, mode restartMode,
	workers int, settle time.Duration, progress func(string, ...any)) (*restartResult, error) {
	tl := lb.log
	tl.reset()
	res := &restartResult{mode: mode, ops: map[string]*opCount{}}
	tr := &traffic{c: cp.developer, prefix: fmt.Sprintf("r%d", time.Now().Unix()%100000), ops: res.ops, failures: &res.failures, log: tl}
	acc, nob, dial := lb.accepted.Load(), lb.noBackend.Load(), lb.dialFailed.Load()
	started := time.Now()
	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { tr.loop(tctx, w) })
	}
	tl.add("traffic: %d workers writing through the API server", workers)
	sleep(ctx, settle)
	for _, r := range replicas {
		if ctx.Err() != nil {
			break
		}
		if mode.deleted {
			lb.setTerminating(r, true)
			tl.add("%s deleted: out of the endpoints", r.name)
		}
		tl.add("SIGTERM %s (pid %d)", r.name, r.pid())
		took, err := r.terminate()
		if err != nil {
			stop()
			wg.Wait()
			return nil, err
		}
		tl.add("%s exited after %s (%v)", r.name, took.Round(time.Millisecond), r.exitErr())
		res.exits = append(res.exits, fmt.Sprintf("%s: %s", r.name, took.Round(time.Millisecond)))
		lb.replaced(r)
		if err := r.start(); err != nil {
			stop()
			wg.Wait()
			return nil, err
		}
		tl.add("%s started (pid %d)", r.name, r.pid())
		if err := r.waitReady(ctx, 60*time.Second); err != nil {
			stop()
			wg.Wait()
			return nil, err
		}
		tl.add("%s /readyz ok", r.name)
		for !lb.inRotation(r) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		sleep(ctx, settle)
	}
	stop()
	wg.Wait()
	tl.add("traffic stopped")
	res.elapsed = time.Since(started)
	for _, r := range replicas {
		addShutdownLog(tl, r.logPath, started)
	}
	res.events = tl.lines()
	sort.SliceStable(res.events, func(i, j int) bool { return res.events[i] < res.events[j] })
	res.lb = fmt.Sprintf("%d connections, %d closed for want of a ready replica, %d refused by the chosen replica",
		lb.accepted.Load()-acc, lb.noBackend.Load()-nob, lb.dialFailed.Load()-dial)
	progress("rolling restart (%s): %d writes, %d failed", mode.name, res.total(), res.failures.total)
	return res, nil
}

func (r *restartResult) total() int {
	n := 0
	for _, oc := range r.ops {
		n += oc.total
	}
	return n
}

// webhookCall finds the webhook and the cause in an API server error.
var webhookCall = regexp.MustCompile(`(failed calling webhook "[^"]+"|conversion webhook for [^ ]+ failed)[^:]*: (.*)`)

// apiErrorCause names why a write failed: the webhook the API server could
// not call and how, or the error's reason.
func apiErrorCause(err error) string {
	msg := err.Error()
	if m := webhookCall.FindStringSubmatch(msg); m != nil {
		how := m[2]
		for _, k := range []string{"connection refused", "connection reset by peer", "EOF", "context deadline exceeded",
			"Client.Timeout", "no route", "tls:", "x509:", "http: server closed idle connection", "broken pipe"} {
			if strings.Contains(how, k) {
				how = k
				break
			}
		}
		return m[1] + ": " + how
	}
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return msg
}

// shutdownMessages are the replica log lines worth placing on the
// timeline: when it was asked to stop, and when each part stopped.
var shutdownMessages = []string{"Stopping and waiting", "Shutting down webhook server", "Wait completed", "stopped",
	"Serving webhook server", "Starting webhook server", "starting"}

// addShutdownLog puts a replica's start and shutdown log lines since since
// on the timeline.
func addShutdownLog(tl *timeline, path string, since time.Time) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	name := strings.TrimSuffix(filepath.Base(path), ".log")
	for s.Scan() {
		var line struct {
			TS     any    `json:"ts"`
			Msg    string `json:"msg"`
			Logger string `json:"logger"`
		}
		if json.Unmarshal(s.Bytes(), &line) != nil {
			continue
		}
		at, ok := logTime(line.TS)
		if !ok || at.Before(since) {
			continue
		}
		for _, m := range shutdownMessages {
			if strings.HasPrefix(line.Msg, m) {
				tl.mu.Lock()
				tl.events = append(tl.events, fmt.Sprintf("%7.2fs  %s log: %s", at.Sub(tl.start).Seconds(), name, line.Msg))
				tl.mu.Unlock()
				break
			}
		}
	}
}

// logTime reads zap's ts: epoch seconds or RFC 3339.
func logTime(ts any) (time.Time, bool) {
	switch v := ts.(type) {
	case float64:
		return time.Unix(0, int64(v*1e9)), true
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	}
	return time.Time{}, false
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
