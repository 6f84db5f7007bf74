package wait

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The NIC's test: a CQ's cumulative count against a WAIT's 24-bit count.
func TestSatisfied(t *testing.T) {
	for _, c := range []struct {
		produced uint64
		count    uint32
		want     bool
	}{
		{0, 0, true},
		{0, 1, false},
		{5, 5, true},
		{6, 5, true},
		{1<<24 - 1, 0, false}, // 0 is just after 2^24-1
		{1 << 24, 0, true},    // wrapped: 2^24 completions is count 0 again
		{1<<24 + 1, 1<<24 - 1, true},
		{1<<24 + 1, 2, false},
		{3<<24 + 7, 7, true},
		{1 << 23, 0, false}, // more than half the ring ahead reads as behind
	} {
		assert.Equal(t, c.want, Satisfied(c.produced, c.count), "produced %d count %d", c.produced, c.count)
	}
}

// The managed queue's test: a WQE's cumulative index against the 16-bit enable index.
func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		idx  uint64
		upto uint32
		want bool
	}{
		{0, 0, false}, {0, 1, true}, {1, 1, false}, {65535, 0, true}, {65536, 0, false},
		{65536, 1, true}, {70000, 70001 - 65536, true}, {70001, 70001 - 65536, false},
		{3, 1<<16 + 4, true}, // bits of upto above the space are ignored
	} {
		assert.Equal(t, c.want, Enabled(c.idx, c.upto), "idx %d upto %d", c.idx, c.upto)
	}
}

// A condition re-armed for iteration i is met by iteration i's completions, not by the ones of
// iteration i-1, also when the counts wrap; At is Target wrapped.
func TestCondRearm(t *testing.T) {
	const per = 1000
	c := Cond{CQ: 2, Count: 600}
	for _, iter := range []uint64{0, 1, 16776, 16777, 16778, 1 << 40} {
		start := uint64(per) * iter // completions produced before the iteration began
		assert.Equal(t, CQ.Wrap(c.Target(per, iter)), c.At(per, iter), "iteration %d", iter)
		assert.False(t, c.SatisfiedBy(start, per, iter), "iteration %d: nothing yet", iter)
		assert.False(t, c.SatisfiedBy(start+599, per, iter), "iteration %d: one short", iter)
		assert.True(t, c.SatisfiedBy(start+600, per, iter), "iteration %d: reached", iter)
		assert.True(t, c.SatisfiedBy(start+per, per, iter), "iteration %d: iteration done", iter)
	}
	assert.Equal(t, uint64(600+3*per), c.Target(per, 3))
}

// An ENABLE re-armed for iteration i lets exactly the queue's WQEs of iteration i below UpTo run.
func TestEnableRearm(t *testing.T) {
	const per = 7
	e := Enable{Queue: 1, UpTo: 3}
	for _, iter := range []uint64{0, 1, 9361, 9362, 1<<40 + 5} {
		first := uint64(per) * iter // index of the iteration's first WQE
		upto := e.At(per, iter)
		assert.True(t, Enabled(first, upto), "iteration %d", iter)
		assert.True(t, Enabled(first+2, upto), "iteration %d", iter)
		assert.False(t, Enabled(first+3, upto), "iteration %d", iter)
	}
}

func TestRaise(t *testing.T) {
	assert.Equal(t, uint32(5), Raise(3, 5))
	assert.Equal(t, uint32(5), Raise(5, 3), "an older ENABLE takes nothing back")
	assert.Equal(t, uint32(2), Raise(65534, 2), "forward across the wrap")
	assert.Equal(t, uint32(65534), Raise(65534, 65530))
	assert.Equal(t, uint32(4), Raise(4, 1<<16+4), "wrapped into the space")
}
