package installed_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// loadInterval is the steady load's pace: 20 admissions a second.
const loadInterval = 50 * time.Millisecond

// steadyLoad creates opted-in Pods in a namespace, as server-side dry runs
// (each reviewed by the mutating webhook and the validating ones, as a
// real create is), at a steady pace until stopped, and counts the ones the
// API server refused.
type steadyLoad struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	errs         []string // the first few refusals
	cancel       context.CancelFunc
	done         chan struct{}
}

// startLoad starts a steady load in namespace ns.
func startLoad(ctx context.Context, ns string) *steadyLoad {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &steadyLoad{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(l.done)
		tick := time.NewTicker(loadInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := answered(ctx, ns)
			if ctx.Err() != nil {
				return // stopped mid-request: not the webhook's failure
			}
			l.sent.Add(1)
			if err != nil {
				l.failed.Add(1)
				l.mu.Lock()
				if len(l.errs) < 5 {
					l.errs = append(l.errs, time.Now().Format(time.StampMilli)+" "+err.Error())
				}
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// stop ends the load and returns how many admissions it made and how many
// failed, with the first failures.
func (l *steadyLoad) stop() (sent, failed int64, errs []string) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent.Load(), l.failed.Load(), l.errs
}

// report adds the load's figures to the spec's report and returns them.
func (l *steadyLoad) report(what string) (sent, failed int64, errs []string) {
	sent, failed, errs = l.stop()
	AddReportEntry(what, fmt.Sprintf("%d admissions, %d failed %v", sent, failed, errs))
	return sent, failed, errs
}

// adminClient is the cluster administrator's client.
func adminClient() client.Client {
	GinkgoHelper()
	c, err := client.New(gpuCluster.Admin, client.Options{})
	if err != nil {
		Fail(err.Error())
	}
	return c
}
