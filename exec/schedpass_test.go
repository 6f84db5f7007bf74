package exec

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSchedPass: a goroutine that runs iterations passes through the Go scheduler once per
// rescheduleEvery, and not more often: the runtime's monitor takes the P from a goroutine that
// stayed on one scheduler tick for 10 ms (schedPass).
func TestSchedPass(t *testing.T) {
	assert.Less(t, rescheduleEvery, 10*time.Millisecond, "the monitor's limit is 10 ms")
	base := time.Now()
	p := schedPass{last: base}
	assert.False(t, p.at(base.Add(rescheduleEvery-1)), "before rescheduleEvery")
	assert.True(t, p.at(base.Add(rescheduleEvery)), "at rescheduleEvery")
	last := p.last
	assert.False(t, p.at(last.Add(rescheduleEvery/2)))
	assert.Equal(t, last, p.last, "no pass, no new time")
	assert.True(t, p.at(last.Add(rescheduleEvery)))
	assert.False(t, p.last.Before(last))
}

// TestStallWatchPasses: an engine passes through the scheduler within an iteration, on a round
// that made progress and every 64 idle rounds, so that an iteration of tens of milliseconds
// does too.
func TestStallWatchPasses(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	w := stallWatch{limit: time.Hour}
	w.sched.last = long
	w.progressed()
	assert.True(t, w.sched.last.After(long), "a round with progress")

	w.sched.last = long
	for i := 0; i < 63; i++ {
		_, err := w.quiet(context.Background(), 0)
		assert.NoError(t, err)
	}
	assert.Equal(t, long, w.sched.last, "63 idle rounds")
	_, err := w.quiet(context.Background(), 0)
	assert.NoError(t, err)
	assert.True(t, w.sched.last.After(long), "the 64th idle round")
}
