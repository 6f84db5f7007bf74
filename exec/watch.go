package exec

import (
	"context"
	"fmt"
	"time"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/stop"
)

// stallWatch decides when an engine that found nothing to do in a round is stuck. With a
// provider that reports its own progress (the software NIC), a round where neither the engine
// nor the NIC can move is final at once. With a real NIC the engine keeps polling and gives up
// after the hang timeout without progress, checking the context now and then. The clock is read
// only once every 1024 idle rounds in a row, never on the first: a latency-bound chain makes
// progress after a few idle rounds at every hop, and a clock read can cost microseconds (an
// emulated or virtualised clock source), more than the hop itself.
//
// With a wait set (nic.Blocker: CQs with a kernel wait object), the engine spins for blockAfter
// idle rounds, then each idle round blocks in the kernel until a completion may have come, at most
// maxBlock at a time and never past the hang timeout, which is then counted from the first block.
// Spinning on would take the core from the peers whose work this process waits for, when there
// are more processes than cores.
//
// An iteration that keeps moving never comes to quiet: the engine counts its work (rounds of its
// loop, completions, a software NIC's steps) in poll, which looks at the context once every
// ctxEvery of it.
type stallWatch struct {
	prog  nic.Progresser // nil for a NIC that progresses by itself
	wait  nic.WaitSet    // nil: poll while waiting
	limit time.Duration
	idle  int
	since time.Time
	waits uint64    // blocking waits made (Result.Blocks)
	poll  stop.Poll // the iteration's work, and its context (worked)
	sched schedPass
}

// ctxEvery is how much work (worked) an iteration does between two looks at its context: a
// fraction of a millisecond of a software NIC's steps, a few milliseconds of a real NIC's rounds.
const ctxEvery = 4096

// blockAfter is how many idle rounds in a row an engine with a wait set spins before it blocks.
const blockAfter = 32

// maxBlock bounds one blocking wait, so that a cancelled context is seen soon, and a provider that
// failed to wake the engine costs at most this.
const maxBlock = 10 * time.Millisecond

// reset readies the watch for an iteration under ctx.
func (w *stallWatch) reset(ctx context.Context) {
	w.idle = 0
	w.poll = stop.Every(ctx, ctxEvery)
}

// worked counts n units of iteration iter's work and returns an error once a look at the
// context (one every ctxEvery units) has found it ended. The engines call it every round.
func (w *stallWatch) worked(iter, n int) error {
	if err := w.poll.Add(n); err != nil {
		return stoppedIn(iter, err)
	}
	return nil
}

// count counts n units of work done outside a round's worked (completions, a software NIC's
// steps); a look at the context they bring about is reported by the next worked.
func (w *stallWatch) count(n int) { _ = w.poll.Add(n) }

// ended returns iteration iter's error if ctx ended: its cause, without waiting.
func ended(ctx context.Context, iter int) error {
	if err := stop.Cause(ctx); err != nil {
		return stoppedIn(iter, err)
	}
	return nil
}

// stoppedIn is iteration iter's error once its context ended with cause.
func stoppedIn(iter int, cause error) error { return fmt.Errorf("iteration %d: %w", iter, cause) }

// progressed records a round that made progress, and passes through the Go scheduler if due.
func (w *stallWatch) progressed() {
	w.idle = 0
	w.sched.at(time.Now())
}

// quiet records a round without progress. It reports stuck when the engine should diagnose a
// hang, and an error when ctx ended.
func (w *stallWatch) quiet(ctx context.Context, iter int) (stuck bool, err error) {
	if w.prog != nil {
		n := w.prog.Progress()
		w.count(n)
		return n == 0, nil
	}
	w.idle++
	if w.idle&63 == 0 {
		w.sched.at(time.Now())
	}
	if w.wait != nil && w.idle >= blockAfter {
		return w.block(ctx, iter)
	}
	if w.idle&1023 == 0 {
		now := time.Now()
		if w.idle == 1024 {
			w.since = now
		} else if now.Sub(w.since) > w.limit {
			return true, nil
		}
		return false, ended(ctx, iter)
	}
	return false, nil
}

// block is an idle round of an engine with a wait set past its spin: it blocks until a CQ may
// have a completion, at most maxBlock, and reports stuck once the hang timeout has passed since
// the first block.
func (w *stallWatch) block(ctx context.Context, iter int) (stuck bool, err error) {
	now := time.Now()
	if w.idle == blockAfter {
		w.since = now
	}
	left := w.limit - now.Sub(w.since)
	if left <= 0 {
		return true, nil
	}
	if err := ended(ctx, iter); err != nil {
		return false, err
	}
	if blocked, err := w.wait.Wait(min(left, maxBlock)); err != nil {
		// A broken wait object: poll from now on, still bounded by the hang timeout.
		w.wait = nil
		w.idle = 1024
	} else if blocked {
		w.waits++
	}
	return false, nil
}

// providerStalls is what the NIC says cannot run, for a hang's diagnosis: a software NIC's
// whole fabric (prog), else each local rank's device that can tell (a driver's held requests).
func providerStalls(prog nic.Progresser, res []*rankRes) []nic.Stall {
	if prog != nil {
		return prog.Stalls()
	}
	var out []nic.Stall
	for _, r := range res {
		if r == nil {
			continue
		}
		if s, ok := r.dev.(nic.Staller); ok {
			out = append(out, s.Stalls()...)
		}
	}
	return out
}
