// Package stoptest is for the tests of the passes that stop when their context is cancelled
// (internal/stop): a context cancelled at a given look at it, so where in a pass the
// cancellation comes does not depend on timing.
package stoptest

import (
	"context"
	"sync/atomic"
)

// Looks is a context that counts the looks at it (Err), and is cancelled from the n-th on. Its
// Done channel never closes: it is for passes that look with Err, as internal/stop does. Looks
// may be counted from several goroutines.
type Looks struct {
	context.Context
	n     int64
	count atomic.Int64
}

// CancelAt returns a Looks cancelled (context.Canceled) from its n-th look on; with n 0, it is
// never cancelled, and counts the looks a whole pass makes.
func CancelAt(n int64) *Looks {
	return &Looks{Context: context.Background(), n: n}
}

// Err counts a look, and returns context.Canceled from the n-th on.
func (c *Looks) Err() error {
	if k := c.count.Add(1); c.n > 0 && k >= c.n {
		return context.Canceled
	}
	return nil
}

// Count returns the looks so far.
func (c *Looks) Count() int64 { return c.count.Load() }
