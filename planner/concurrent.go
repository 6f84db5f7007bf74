package planner

import (
	"context"
	"sync"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/prove"
	"github.com/coredag/coredag/planner/verify"
)

// This file owns the goroutines of Load: the passes are plain functions, and only here do they
// run side by side. (Within a pass, its own work may still be split over the CPUs.)

// startBeside runs hook on g on a goroutine of its own (Options.Beside), with a context that
// parent's cancellation cancels. The returned wait cancels hook's context when the checks
// failed, and returns once hook has.
func startBeside(parent context.Context, g *ir.Graph, hook func(ctx context.Context, g *ir.Graph)) (wait func(failed bool)) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		hook(ctx, g)
	}()
	return func(failed bool) {
		if failed {
			cancel()
		}
		<-done
		cancel()
	}
}

// checkOrder runs the checks that read only g and its order of events side by side: the race
// search, the proof of the postconditions and, when opt.Lint is set, the RNR lint (which
// verify.Order.LintRNR runs on a goroutine of its own, in step with the race search). The proof
// starts once the race search leaves a CPU idle (verify.Order.Races), so that it takes no CPU
// the search uses. The proof and the lints count only when there is no race. All stop once ctx
// is cancelled.
func checkOrder(ctx context.Context, g *ir.Graph, order *verify.Order, opt Options) (races, proved, lints diag.List) {
	var lint <-chan diag.List
	if opt.Lint != nil {
		lint = order.LintRNR(ctx)
	}
	found := make(chan diag.List, 1)
	idle := make(chan struct{})
	go func() { found <- order.Races(ctx, sync.OnceFunc(func() { close(idle) })) }()
	<-idle
	proved = prove.Check(ctx, g, order, opt.Prove)
	races = <-found
	if lint != nil {
		lints = <-lint
	}
	return races, proved, lints
}
