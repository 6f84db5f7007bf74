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
	w.reset()
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
