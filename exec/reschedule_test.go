package exec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestOpReschedule: a caller that runs starts inline passes through the Go scheduler once per
// rescheduleEvery, and not more often: the runtime's monitor takes the P from a goroutine that
// stayed on one scheduler tick for 10 ms (Op.reschedule).
func TestOpReschedule(t *testing.T) {
	o := &Op{}
	o.keep.base = time.Now()
	every := int64(rescheduleEvery)
	assert.Less(t, rescheduleEvery, 10*time.Millisecond, "the monitor's limit is 10 ms")
	assert.False(t, o.reschedule(every-1), "before rescheduleEvery")
	assert.True(t, o.reschedule(every), "at rescheduleEvery")
	last := o.sched
	assert.False(t, o.reschedule(last+every/2))
	assert.Equal(t, last, o.sched, "no pass, no new time")
	assert.True(t, o.reschedule(last+every))
	assert.GreaterOrEqual(t, o.sched, last)
}
