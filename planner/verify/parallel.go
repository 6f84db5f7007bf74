package verify

import (
	"runtime"
	"sync"
)

// forcedWorkers, when positive, is how many goroutines the passes of this package split their
// work among instead of one per CPU (for the tests that pin results whatever the split).
var forcedWorkers = 0

// workerCount is how many goroutines may share n items of work, each taking at least minPart.
func workerCount(n, minPart int) int {
	w := forcedWorkers
	if w <= 0 {
		w = min(runtime.GOMAXPROCS(0), n/max(minPart, 1))
	}
	return max(1, min(w, n))
}

// inParts splits the items [0, n) into contiguous parts of at least minPart items, at most one
// per worker, and calls f on each (forParts).
func inParts(n, minPart int, f func(part, lo, hi int)) {
	forParts(workerCount(n, minPart), n, f)
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
