package wait

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReachedAtTheWrap(t *testing.T) {
	cases := []struct {
		name          string
		s             Space
		count, target uint32
		want          bool
	}{
		{"cq equal", CQ, 5, 5, true},
		{"cq below", CQ, 4, 5, false},
		{"cq above", CQ, 6, 5, true},
		{"cq wrapped past target", CQ, 2, 1<<24 - 2, true},
		{"cq not yet at wrapped target", CQ, 1<<24 - 3, 1, false},
		{"cq at max", CQ, 1<<24 - 1, 1<<24 - 1, true},
		{"cq zero reaches max-1+1", CQ, 0, 1<<24 - 1, true},
		{"cq half away is behind", CQ, 0, 1 << 23, false},
		{"cq half-1 ahead", CQ, 1<<23 - 1, 0, true},
		{"wq wrapped", WQ, 3, 65534, true},
		{"wq before wrap", WQ, 65534, 3, false},
		{"wq half", WQ, 1 << 15, 0, false},
		{"wq half-1", WQ, 1<<15 - 1, 0, true},
		{"wq bits above the space ignored", WQ, 1<<16 + 7, 7, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.s.Reached(c.count, c.target))
		})
	}
}

func TestDiff(t *testing.T) {
	assert.Equal(t, int32(3), CQ.Diff(1, 1<<24-2))
	assert.Equal(t, int32(-3), CQ.Diff(1<<24-2, 1))
	assert.Equal(t, int32(-(1 << 23)), CQ.Diff(0, 1<<23))
	assert.Equal(t, int32(2), WQ.Diff(0, 65534))
	assert.Equal(t, int32(0), WQ.Diff(9, 9))
}

func TestAtRearm(t *testing.T) {
	cases := []struct {
		s         Space
		base, per uint32
		iter      uint64
		want      uint32
	}{
		{CQ, 3, 5, 0, 3},
		{CQ, 3, 5, 2, 13},
		{CQ, 1, 2, 1 << 23, 1},   // 2^24 completions later: back to the base
		{CQ, 1<<24 - 1, 1, 1, 0}, // first wrap
		{CQ, 7, 3, 1_000_000_000, (7 + 3_000_000_000) & (1<<24 - 1)},
		{WQ, 2, 2, 32767, (2 + 2*32767) & 0xffff},
		{WQ, 2, 2, 32768, 2},
		{WQ, 10, 7, 1<<40 + 1, 17}, // huge iteration counts do not overflow
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.s.At(c.base, c.per, c.iter), "%v base %d per %d iter %d", c.s, c.base, c.per, c.iter)
	}
}

// A persistent plan re-armed across the wrap keeps ordering right: iteration i's target is
// reached by iteration i's completions and not by iteration i-1's.
func TestRearmAcrossWrapOrdersIterations(t *testing.T) {
	const per = 1000
	base := uint32(1<<24 - 1500) // starts close to the wrap
	for iter := uint64(0); iter < 5; iter++ {
		target := CQ.At(base, per, iter)
		if iter > 0 {
			prev := CQ.At(base, per, iter-1)
			assert.False(t, CQ.Reached(prev, target), "iteration %d: previous count must not satisfy", iter)
		}
		assert.True(t, CQ.Reached(target, target))
		assert.True(t, CQ.Reached(CQ.Add(target, per-1), target))
	}
}

func TestCheck(t *testing.T) {
	assert.NoError(t, WQ.Check(1<<15-1))
	assert.Error(t, WQ.Check(1<<15))
	assert.NoError(t, CQ.Check(1<<23-1))
	assert.ErrorContains(t, CQ.Check(1<<23), "24-bit")
}

func FuzzReachedConsistentWithDiff(f *testing.F) {
	f.Add(uint32(0), uint32(0))
	f.Add(uint32(1<<24-1), uint32(1))
	f.Fuzz(func(t *testing.T, a, b uint32) {
		for _, s := range []Space{CQ, WQ} {
			if s.Reached(a, b) != (s.Diff(a, b) >= 0) {
				t.Fatalf("%v: Reached(%d,%d) disagrees with Diff %d", s, a, b, s.Diff(a, b))
			}
		}
	})
}
