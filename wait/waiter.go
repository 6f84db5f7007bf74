package wait

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Counter is a cumulative 24-bit completion counter with blocking waiters, such as the producer
// index of a software CQ. Add and Load are lock-free; Wait parks on a channel that Add closes,
// so a waiter wakes on every advance and re-checks its condition.
type Counter struct {
	v  atomic.Uint64 // unwrapped total; the 24-bit view is derived
	mu sync.Mutex
	ch chan struct{} // closed and replaced when v advances and someone waits
}

// Add advances the counter by n and wakes waiters.
func (c *Counter) Add(n uint32) {
	c.v.Add(uint64(n))
	c.mu.Lock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
	c.mu.Unlock()
}

// Load returns the counter's value in the 24-bit CQ space.
func (c *Counter) Load() uint32 { return CQ.Wrap(c.v.Load()) }

// Total returns the unwrapped number of completions counted so far.
func (c *Counter) Total() uint64 { return c.v.Load() }

// Reached reports whether the counter has reached target (cyclically).
func (c *Counter) Reached(target uint32) bool { return CQ.Reached(c.Load(), target) }

// changed returns a channel closed at the next Add.
func (c *Counter) changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// ErrStuck is returned (wrapped) by waits that ran out of time or were cancelled.
var ErrStuck = fmt.Errorf("wait: condition not reached")

// Wait blocks until the counter reaches target or ctx ends. The error names the value reached
// and the value awaited, so a hang can be diagnosed.
func (c *Counter) Wait(ctx context.Context, target uint32) error {
	for {
		ch := c.changed()
		if c.Reached(target) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: count %d, awaited %d: %v", ErrStuck, c.Load(), target, ctx.Err())
		}
	}
}

// WaitTimeout is Wait with a deadline d from now.
func (c *Counter) WaitTimeout(d time.Duration, target uint32) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Wait(ctx, target)
}

// Spin polls ready until it returns true, up to maxPolls times, yielding the processor between
// polls. It is the busy-poll waiter of the polling engine: no allocation, no lock. It reports
// whether ready returned true.
func Spin(ready func() bool, maxPolls int) bool {
	for i := 0; i < maxPolls; i++ {
		if ready() {
			return true
		}
		if i&63 == 63 {
			runtime.Gosched()
		}
	}
	return false
}

// All reports whether every condition holds, reading counter values through value.
func All(conds []Cond, value func(counter int32) uint32) bool {
	for _, c := range conds {
		if !c.Holds(value(c.Counter)) {
			return false
		}
	}
	return true
}
