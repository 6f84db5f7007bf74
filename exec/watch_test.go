package exec

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

type fakeProgress struct{ moves int }

func (f *fakeProgress) Progress() int {
	if f.moves > 0 {
		f.moves--
		return 1
	}
	return 0
}
func (f *fakeProgress) Stalls() []nic.Stall { return nil }

func TestStallWatch(t *testing.T) {
	// A NIC that reports progress: stuck exactly when it can no longer move.
	p := &fakeProgress{moves: 2}
	w := stallWatch{prog: p, limit: time.Hour}
	for i := 0; i < 2; i++ {
		stuck, err := w.quiet(context.Background(), 0)
		require.NoError(t, err)
		assert.False(t, stuck)
	}
	stuck, _ := w.quiet(context.Background(), 0)
	assert.True(t, stuck)

	// A NIC that progresses by itself: stuck only after the limit without progress.
	w = stallWatch{limit: 5 * time.Millisecond}
	start := time.Now()
	for {
		stuck, err := w.quiet(context.Background(), 0)
		require.NoError(t, err)
		if stuck {
			break
		}
		require.Less(t, time.Since(start), time.Minute, "the watch never gave up")
	}
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)

	// Progress restarts the count; a cancelled context ends the wait with its error once a
	// thousand idle rounds in a row have passed (the clock and context are not read earlier).
	w.reset(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var err error
	rounds := 0
	for err == nil && rounds < 4096 {
		_, err = w.quiet(ctx, 7)
		rounds++
	}
	assert.Equal(t, 1024, rounds)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "iteration 7")
}

type fakeWaitSet struct {
	calls   int
	longest time.Duration
	blocked bool
	err     error
}

func (f *fakeWaitSet) Wait(d time.Duration) (bool, error) {
	f.calls++
	f.longest = max(f.longest, d)
	return f.blocked, f.err
}

// TestStallWatchBlocks: with a wait set the watch spins blockAfter idle rounds, then blocks on
// every idle round, each wait bounded by maxBlock and by what is left of the hang timeout; it
// counts the waits that blocked, sees a cancelled context at the first block, gives up after the
// limit, and polls on (still bounded) when waiting fails.
func TestStallWatchBlocks(t *testing.T) {
	ctx := context.Background()
	f := &fakeWaitSet{blocked: true}
	w := stallWatch{wait: f, limit: 5 * time.Millisecond}
	for i := 1; i < blockAfter; i++ {
		stuck, err := w.quiet(ctx, 0)
		require.NoError(t, err)
		require.False(t, stuck)
	}
	assert.Zero(t, f.calls, "spins first")
	start := time.Now()
	for {
		stuck, err := w.quiet(ctx, 0)
		require.NoError(t, err)
		if stuck {
			break
		}
		require.Less(t, time.Since(start), time.Minute, "the watch never gave up")
	}
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
	assert.Positive(t, f.calls)
	assert.LessOrEqual(t, f.longest, 5*time.Millisecond, "never past the hang timeout")
	assert.Equal(t, uint64(f.calls), w.waits)

	// A wait bounded by maxBlock when the limit is far; one that could not block is not counted.
	f2 := &fakeWaitSet{}
	w = stallWatch{wait: f2, limit: time.Hour}
	for i := 0; i < blockAfter+3; i++ {
		_, err := w.quiet(ctx, 0)
		require.NoError(t, err)
	}
	assert.Equal(t, 4, f2.calls)
	assert.Equal(t, maxBlock, f2.longest)
	assert.Zero(t, w.waits)

	// A cancelled context ends the wait at the first block.
	w = stallWatch{wait: f, limit: time.Hour}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var err error
	rounds := 0
	for err == nil && rounds < 4096 {
		_, err = w.quiet(cctx, 3)
		rounds++
	}
	assert.Equal(t, blockAfter, rounds)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "iteration 3")

	// A wait that fails: the watch polls from then on, and still gives up after the limit.
	bad := &fakeWaitSet{err: assert.AnError}
	w = stallWatch{wait: bad, limit: 5 * time.Millisecond}
	start = time.Now()
	for {
		stuck, err := w.quiet(ctx, 0)
		require.NoError(t, err)
		if stuck {
			break
		}
		require.Less(t, time.Since(start), time.Minute, "the watch never gave up")
	}
	assert.Equal(t, 1, bad.calls, "no wait after one failed")
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
}

// stallingCtx is a device whose driver tells what it holds.
type stallingCtx struct {
	nic.Context
	held []nic.Stall
}

func (c stallingCtx) Stalls() []nic.Stall { return c.held }

func TestProviderStalls(t *testing.T) {
	a := nic.Stall{Rank: 0, QPN: 1, Op: nic.OpRDMAWriteImm, Reason: nic.StallImmRefused}
	b := nic.Stall{Rank: 2, QPN: 3, Recv: true, Op: nic.OpRecv, Reason: nic.StallProviderFull, Reached: 4, Awaited: 4}
	res := []*rankRes{{dev: stallingCtx{held: []nic.Stall{a}}}, nil, {dev: struct{ nic.Context }{}}, {dev: stallingCtx{held: []nic.Stall{b}}}}
	assert.Equal(t, []nic.Stall{a, b}, providerStalls(nil, res), "each local rank's device that can tell, in rank order")
	assert.Contains(t, a.String(), "its write went; the provider refuses its message")
	assert.Contains(t, b.String(), "4 of its 4 entries")

	assert.Nil(t, providerStalls(&fakeProgress{}, res), "a software NIC sees its whole fabric: it alone answers")
}
