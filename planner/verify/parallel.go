package verify

import (
	"runtime"
	"sync"

	"github.com/coredag/coredag/ir"
)

// Options are the settings of the checks. The zero value is what coredag uses.
type Options struct {
	// Workers, when positive, is how many goroutines every step of the checks splits its work
	// among, whatever the size of the graph; 0 lets each step choose (at most one per CPU).
	// The results do not depend on it: tests set it to exercise the splits on any machine.
	Workers int

	// Order is the ordering the target guarantees between the landings of consecutive ops of
	// one queue's send side (ir.Target.Order): the race check proves a plan under it. The zero
	// value is none.
	Order ir.Order
	// Target names the target Order is of, for messages. When set, a race that an ordering some
	// targets give would remove says so, and Order.Reliance words what a plan race-free only
	// thanks to Order relies on; both cost further race searches, and only for plans that race
	// without ordering.
	Target string

	// FixBudget bounds the search for the `after` edges that fix a plan's races, and their
	// proof, in events visited; 0 is the default (about a second of searching), a negative
	// budget searches nothing. Races past it get no suggested fix, and their diagnostics say
	// why.
	FixBudget int

	// Test hooks: wideLabels makes the labels of the long-path oracle 32 bits wide whatever the
	// chains; resolved, unless nil, is given the oracle's scratch once it is done.
	wideLabels bool
	resolved   func(r *sepReach)
}

// workerCount is how many goroutines may share n items of work, each taking at least minPart
// (o may be nil: the defaults).
func (o *Options) workerCount(n, minPart int) int {
	w := 0
	if o != nil {
		w = o.Workers
	}
	if w <= 0 {
		w = min(runtime.GOMAXPROCS(0), n/max(minPart, 1))
	}
	return max(1, min(w, n))
}

// inParts splits the items [0, n) into contiguous parts of at least minPart items, at most one
// per worker, and calls f on each (forParts).
func (o *Options) inParts(n, minPart int, f func(part, lo, hi int)) {
	forParts(o.workerCount(n, minPart), n, f)
}

// forParts splits the items [0, n) into exactly parts contiguous parts, in order, part i
// covering [i*n/parts, (i+1)*n/parts), and calls f on each on a goroutine of its own; it returns
// when all are done. Callers write only where their own part says, so the result does not
// depend on how the work is split. A pass in two rounds over the same parts (count, then
// place) takes parts from workerCount once and gives it to both: GOMAXPROCS may change between
// the rounds.
func forParts(parts, n int, f func(part, lo, hi int)) {
	if parts <= 1 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := i*n/parts, (i+1)*n/parts
		wg.Go(func() { f(i, lo, hi) })
	}
	wg.Wait()
}

// cursors turns counts[p][k], how many items of key k part p has, into where part p places its
// first item of key k when the items are grouped by key and, within a key, by part; it returns
// where each key's items start (and, last, how many there are).
func cursors[T int | int32](counts [][]T, keys int) []T {
	start := make([]T, keys+1)
	for k := range keys {
		next := start[k]
		for _, c := range counts {
			n := c[k]
			c[k] = next
			next += n
		}
		start[k+1] = next
	}
	return start
}
