// Package stop is how the passes of the compiler (elaboration, the checks, the proof, the
// lowering, the replay and the cost model) notice that the context they were given is
// cancelled. A pass looks at its context between its steps (Cause) and, within a step that can
// take long, once every so much work (Poll): a look costs an atomic load, too much for every
// item of a hot loop, and a millisecond of work between two looks is soon enough to stop.
//
// A pass stopped by its context returns the context's cause (context.Cause), never what it had
// found so far: that is incomplete, and means nothing. A pass takes its context as its first
// parameter, never from its options; a caller with nothing to cancel passes
// context.Background(). A nil context never ends here, so that a caller's mistake cannot panic
// a pass's worker goroutine, where no recover of the caller's would catch it.
package stop

import "context"

// Cause returns the cause of ctx's cancellation (context.Cause), or nil while ctx goes on (and
// for a nil ctx).
func Cause(ctx context.Context) error {
	if ctx == nil || ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Stopped returns the cause of ctx's cancellation when err is not nil and ctx is cancelled, and
// nil otherwise. err is then what work that ctx stopped says of itself (a wrapped cause, or a
// failure it met as it stopped): not the work's verdict, and not to be reported in place of the
// cause.
func Stopped(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	return Cause(ctx)
}

// Poll counts the work of a loop and looks at a context once every so much of it. Once a look
// has found the context cancelled, the Poll stays stopped. A Poll is for one goroutine: a loop
// split over several takes one per goroutine. The zero Poll never looks, and never stops.
type Poll struct {
	ctx   context.Context
	every int   // the work between two looks
	left  int   // the work until the next look
	err   error // the context's cause, once a look found it cancelled
}

// Every returns a Poll that looks at ctx once every n units of work (n > 0).
func Every(ctx context.Context, n int) Poll {
	return Poll{ctx: ctx, every: n, left: n}
}

// Add counts n units of work, and looks at the context if they bring the work since the last
// look to the Poll's n or more. It returns the context's cause once a look has found it
// cancelled, and nil until then.
func (p *Poll) Add(n int) error {
	if p.left -= n; p.left > 0 {
		return nil
	}
	return p.look()
}

// look looks at the context, for Add: apart, so that Add is inlined in the loops that count.
// Once stopped, every Add comes here, and gets the cause again.
//
//go:noinline
func (p *Poll) look() error {
	if p.err == nil {
		p.err = Cause(p.ctx)
	}
	if p.err != nil {
		p.left = 0
	} else {
		p.left = p.every
	}
	return p.err
}

// Step counts one unit of work (Add).
func (p *Poll) Step() error { return p.Add(1) }
