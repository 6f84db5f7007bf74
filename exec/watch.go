package exec

import (
	"context"
	"fmt"
	"time"

	"github.com/coredag/coredag/exec/nic"
)

// stallWatch decides when an engine that found nothing to do in a round is stuck. With a
// provider that reports its own progress (the software NIC), a round where neither the engine
// nor the NIC can move is final at once. With a real NIC the engine keeps polling and gives up
// after the hang timeout without progress, checking the context now and then. The clock is read
// only once every 1024 idle rounds in a row, never on the first: a latency-bound chain makes
// progress after a few idle rounds at every hop, and a clock read can cost microseconds (an
// emulated or virtualised clock source), more than the hop itself.
type stallWatch struct {
	prog  nic.Progresser // nil for a NIC that progresses by itself
	limit time.Duration
	idle  int
	since time.Time
}

// reset records a round that made progress.
func (w *stallWatch) reset() { w.idle = 0 }

// quiet records a round without progress. It reports stuck when the engine should diagnose a
// hang, and an error when ctx ended.
func (w *stallWatch) quiet(ctx context.Context, iter int) (stuck bool, err error) {
	if w.prog != nil {
		return w.prog.Progress() == 0, nil
	}
	w.idle++
	if w.idle&1023 == 0 {
		now := time.Now()
		if w.idle == 1024 {
			w.since = now
		} else if now.Sub(w.since) > w.limit {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("iteration %d: %w", iter, ctx.Err())
		default:
		}
	}
	return false, nil
}
