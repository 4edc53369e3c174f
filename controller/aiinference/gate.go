package aiinference

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// CRDPoll is how often a replica without the AIInference CRD looks for it.
const CRDPoll = 15 * time.Second

// Served reports whether the API server serves AIInference in v1, through
// mgr's RESTMapper (which asks discovery again on a miss).
func Served(mgr ctrl.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(servingv1.GroupVersion.WithKind("AIInference").GroupKind(), servingv1.GroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("looking for the AIInference API: %w", err)
}

// SetupWhenServed sets the controller up in mgr at once when the API
// server serves AIInference, and otherwise once it does: modelgate's
// webhooks need no CRD to start, and a cluster that installs the CRD
// after modelgate gets the controller without a restart. served is
// Served but for tests; poll is how often it asks.
func (r *Reconciler) SetupWhenServed(mgr ctrl.Manager, served func() (bool, error), poll time.Duration) error {
	ok, err := served()
	if err == nil && ok {
		return r.SetupWithManager(mgr)
	}
	return mgr.Add(crdGate{mgr: mgr, r: r, served: served, poll: poll})
}

// crdGate waits for the AIInference API, then adds the controller to the
// running manager. Only the leader waits: the controller is its alone.
type crdGate struct {
	mgr    ctrl.Manager
	r      *Reconciler
	served func() (bool, error)
	poll   time.Duration
}

func (g crdGate) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("aiinference")
	log.Info("the AIInference API is not served: the controller waits for its CRD", "poll", g.poll)
	t := time.NewTicker(g.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ok, err := g.served()
		if err != nil {
			log.Error(err, "looking for the AIInference CRD")
			continue
		}
		if ok {
			log.Info("the AIInference API is served: starting the controller")
			return g.r.SetupWithManager(g.mgr)
		}
	}
}
