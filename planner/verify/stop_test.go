package verify

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/stoptest"
	"github.com/coredag/coredag/ir"
)

// broadcastReads is a plan whose race sweep is quadratic in its sends: rank 0 sends one buffer
// n times, and as nothing orders the sends' reads of it (each is done at its landing, the next
// starts at the previous start), every read stays in the segment's antichain and each new one
// is searched against all the others.
func broadcastReads(t *testing.T, n int) *ir.Graph {
	return graphOf(t, fmt.Sprintf(`plan reads
param ranks = 2
buffer b f32[4]
buffer d f32[%d]
queue q to 1 - rank peer q depth 32768
if rank == 0 {
  for i in 0 .. %d { op s[i] = send q b }
} else {
  for i in 0 .. %d { op r[i] = recv q d[4 * i : 4 * i + 4] }
}
`, 4*n, n, n))
}

// TestSweepStops: once its context is cancelled, the race sweep looks at it within
// sweepPoll units of work and stops, whatever the size of the antichains: the searches it made
// (its scratch's epoch counts them) are a few thousand, where the whole sweep of the same plan
// makes about n(n-1)/2 of them. findRacesOn then reports nothing. Before, the sweep ran to its end:
// 24 s for n = 10000, and SIGTERM could not stop `coredag check`.
func TestSweepStops(t *testing.T) {
	t.Parallel()
	const n = 600
	g := broadcastReads(t, n)
	// The graphs are built and the accesses collected, then the context cancelled (or not)
	// before the sweep.
	sweep := func(stop bool) (searches int, races []Race) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		opt := &Options{Workers: 1}
		h, h2 := newHB(ctx, g, true, opt), newHB(ctx, g, true, opt)
		require.True(t, h.acyclic && h2.acyclic)
		col, col2 := collectAccesses(ctx, g, 0, 1, opt), collectAccesses(ctx, g, 0, 1, opt)
		if stop {
			cancel()
		}
		f := &raceFinder{g: g, h: h, found: map[[2]int32]bool{}, col: col}
		sw := f.sweep(ctx, 1, nil)
		require.Len(t, sw, 1)
		return int(sw[0].s.epoch), findRacesOn(ctx, g, h2, 1, col2, nil)
	}
	all, races := sweep(false)
	assert.Empty(t, races, "the reads commute")
	assert.GreaterOrEqual(t, all, n*(n-1)/4)

	stopped, races := sweep(true)
	assert.LessOrEqual(t, stopped, 2*sweepPoll)
	assert.Less(t, stopped, all/10)
	assert.Nil(t, races)
}

// TestChecksStopped: with a cancelled context, the checks return at once and return
// nothing, where the same checks find a race and a deadlock.
func TestChecksStopped(t *testing.T) {
	t.Parallel()
	racy := graphOf(t, "plan p\nbuffer a i32[8]\nop x = copy a[0:4] to a[4:8]\nop y = copy a[4:8] to a[0:4]\n")
	cycle := graphOf(t, "plan p\nop x = nop after y\nop y = nop after x\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, g := range []*ir.Graph{racy, cycle} {
		require.NotEmpty(t, Check(t.Context(), g), g.Name)
		errs, o := CheckOrder(ctx, g)
		assert.Empty(t, errs, g.Name)
		assert.Nil(t, o, g.Name)
		errs, o = CheckDeadlocks(ctx, g)
		assert.Empty(t, errs, g.Name)
		assert.Nil(t, o, g.Name)
	}
	// Stopped while the happens-before graph is built: it is left unsorted.
	ring := ringGraph(t, 16)
	require.True(t, newHB(t.Context(), ring, true, &Options{}).acyclic)
	assert.False(t, newHB(ctx, ring, true, &Options{}).acyclic)
	assert.Empty(t, collectAccesses(ctx, ring, 0, 1, &Options{}).acc)
	// Stopped between the steps: Races after the deadlocks passed.
	errs, o := CheckDeadlocks(t.Context(), racy)
	require.Empty(t, errs)
	require.NotNil(t, o)
	assert.Empty(t, o.Races(ctx, nil))
	fixes := SuggestFixes(ctx, racy)
	assert.Equal(t, FixPlan{Stopped: true}, fixes, "a stopped search claims neither fixes nor a spent budget")
	assert.False(t, SuggestFixes(t.Context(), racy).Stopped)
}

// TestRelianceStopped: Relied and Reliance keep their answer only when they found it whole. A
// call stopped by its context, as it starts or half way through its searches, leaves nothing
// behind: a later call with a live context answers as a fresh Order does. Before, the first
// call's answer was kept, cancelled or not, and later callers got its part of the answer.
func TestRelianceStopped(t *testing.T) {
	t.Parallel()
	// publishSend with a write first, which orders nothing: the fewest orderings leave out the
	// write-after-write ordering its queue could use.
	extraWrite := `plan p
param ranks = 2
param n = 4
buffer data f32[2 * n] init rank
buffer inbox f32[n] remote_write
buffer spare f32[n] remote_write
buffer flag f32[n]
buffer out f32[n]
queue q to (rank + 1) % ranks peer q
op w0  = write q data[0 : n] to spare
op w   = write q data[0 : n] to inbox
op s   = send q data[n : 2 * n]
op got = recv q flag
op use = copy inbox to out after got
`
	for _, src := range []string{publishNotify, publishSend, readThenSend, extraWrite} {
		g := graphOf(t, src)
		opt := targetOptions(t, "triggered-sockets") // all nine orderings: the most searches
		order := func() *Order {
			errs, o := opt.CheckOrder(t.Context(), g)
			require.Empty(t, errs)
			require.NotNil(t, o.rely, "race-free only under the ordering")
			return o
		}
		fresh, all := order(), stoptest.CancelAt(0)
		relied, warning := fresh.Relied(all), fresh.Reliance(all)
		require.NotNil(t, relied)
		require.NotNil(t, warning)
		if src == extraWrite {
			require.Equal(t, ir.OrderSAW, relied.Order, "the write-after-write ordering is not needed")
		}
		n := all.Count()
		require.Greater(t, n, int64(2))
		for _, at := range []int64{1, n / 2} {
			// Relied stopped, then Reliance; then Reliance alone.
			o := order()
			o.Relied(stoptest.CancelAt(at))
			o.Reliance(stoptest.CancelAt(at))
			assert.Equal(t, relied, o.Relied(context.Background()), "Relied cancelled at look %d of %d:\n%s", at, n, src)
			assert.Equal(t, warning, o.Reliance(context.Background()), "Reliance cancelled at look %d of %d:\n%s", at, n, src)
			o = order()
			o.Reliance(stoptest.CancelAt(at))
			assert.Equal(t, warning, o.Reliance(context.Background()), "Reliance alone cancelled at look %d:\n%s", at, src)
		}
		// Side by side, a stopped call and a live one: the live one answers whole.
		o := order()
		var wg sync.WaitGroup
		wg.Go(func() {
			ctx := stoptest.CancelAt(n / 2)
			o.Relied(ctx)
			o.Reliance(ctx)
		})
		wg.Go(func() {
			assert.Equal(t, relied, o.Relied(context.Background()))
			assert.Equal(t, warning, o.Reliance(context.Background()))
		})
		wg.Wait()
		// Found whole, the answer is kept: a cancelled context no longer changes it.
		stopped, cancel := context.WithCancel(context.Background())
		cancel()
		assert.Same(t, relied, fresh.Relied(stopped))
		assert.Same(t, warning, fresh.Reliance(stopped))
	}
}
