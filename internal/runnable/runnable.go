// Package runnable holds the manager runnables modelgate's reconcilers and
// webhook server share.
package runnable

import "context"

// EveryReplica is a runnable every replica runs, whether or not it holds
// the AIInference controller's lease: what loads the policies, the
// exceptions and the claim caches each replica judges with.
type EveryReplica func(context.Context) error

// Start runs f.
func (f EveryReplica) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (EveryReplica) NeedLeaderElection() bool { return false }
