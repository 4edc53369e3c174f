package certmanager_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
)

// The load: a Pod created every loadInterval, at most loadInFlight at a
// time; a tick that finds them all in flight is skipped (counted, not a
// failure: the machine, not the admission, is slow).
const (
	loadInterval = 50 * time.Millisecond
	loadInFlight = 8
)

// createPod creates an opted-in Pod through the API server (a server-side
// dry run: every admission webhook is called, nothing is stored) and
// checks that modelgate's mutating webhook injected it.
func createPod(ctx context.Context, c client.Client) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "load-", Annotations: map[string]string{
			annotations.Inject: "true",
			annotations.Model:  "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
			annotations.Engine: "vllm",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.9.1"}}},
	}
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
		return err
	}
	if _, ok := pod.Annotations[annotations.Injected]; !ok {
		return errors.New("the Pod came back without modelgate's injection")
	}
	return nil
}

// load creates Pods at a steady rate until stopped, counting those
// admitted and keeping why the others were not.
type load struct {
	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time
	mu      sync.Mutex
	ok      int
	skipped int
	failed  []error
	ended   time.Time
}

// startLoad starts creating Pods.
func startLoad(ctx context.Context, c client.Client) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		slots := make(chan struct{}, loadInFlight)
		tick := time.NewTicker(loadInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				l.mu.Lock()
				l.skipped++
				l.mu.Unlock()
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				at := time.Now()
				// Not ctx: a create in flight when the load stops finishes.
				l.record(createPod(context.WithoutCancel(ctx), c), at)
			})
		}
	}()
	return l
}

func (l *load) record(err error, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, fmt.Errorf("create at %s: %w", at.Format("15:04:05.000"), err))
		return
	}
	l.ok++
}

// burst creates n Pods at once beside the steady load, recorded as its
// own, and returns when they are done.
func (l *load) burst(ctx context.Context, c client.Client, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			at := time.Now()
			l.record(createPod(ctx, c), at)
		})
	}
	wg.Wait()
}

// admitted is the count of Pods admitted so far.
func (l *load) admitted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok
}

// waitMore waits until n more Pods have been admitted.
func (l *load) waitMore(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	want := l.admitted() + n
	if err := wait.PollUntilContextTimeout(ctx, loadInterval, time.Minute, true, func(context.Context) (bool, error) {
		return l.admitted() >= want, nil
	}); err != nil {
		t.Fatalf("waiting for %d more admissions: %v", n, err)
	}
}

// stop stops the load, waits for the creates in flight and returns the
// count admitted and the failures.
func (l *load) stop() (int, []error) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = time.Now()
	return l.ok, l.failed
}

// skips is the count of ticks skipped with every create in flight.
func (l *load) skips() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skipped
}

// rate is the admissions' rate over the load's run.
func (l *load) rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.ok) / l.ended.Sub(l.started).Seconds()
}
