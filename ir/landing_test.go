package ir_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/ir"
)

// LandWeight counts a write that lands wholly inside a counted region of the rank it is sent to
// (an empty one at either edge too), and an atomic add's addend into a watched word; Landing
// sums them.
func TestLandWeight(t *testing.T) {
	t.Parallel()
	word := ir.Slice{Buf: 1, Off: 0, Len: 1}
	g := twoQueues(
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 2), Dst: sl(4, 2)},                        // 0: inside [4, 8)
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 2), Dst: sl(6, 2)},                        // 1: inside
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 2), Dst: sl(7, 2)},                        // 2: partly outside
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 0), Dst: sl(8, 0)},                        // 3: empty, at the end edge
		ir.Op{Kind: ir.OpWrite, Queue: 1, Src: sl(0, 2), Dst: sl(4, 2)},                        // 4: lands on rank 0
		ir.Op{Kind: ir.OpAtomicAdd, Queue: 0, Dst: word, X: &ir.OpExtra{A: 3}},                 // 5: +3
		ir.Op{Kind: ir.OpAtomicAdd, Queue: 0, Dst: word, X: &ir.OpExtra{A: 2}},                 // 6: +2
		ir.Op{Kind: ir.OpAtomicCAS, Queue: 0, Dst: word, X: &ir.OpExtra{A: 0, B: 1}},           // 7: not an add
		ir.Op{Kind: ir.OpAtomicAdd, Queue: 0, Dst: sl(5, 1), X: &ir.OpExtra{A: 1}},             // 8: an add is no write
		ir.Op{Kind: ir.OpCopy, Rank: 1, Src: sl(0, 2), Dst: sl(4, 2)},                          // 9: local
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 1), Dst: sl(5, 1), Notify: true, Rank: 0}, // 10: a notify write lands too
	)
	region := sl(4, 4)
	var got []int64
	for x := range g.Ops {
		got = append(got, g.LandWeight(ir.OpID(x), 1, region, false))
	}
	assert.Equal(t, []int64{1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}, got)
	assert.Equal(t, int64(4), g.Landing(1, region, false))
	assert.Equal(t, int64(0), g.Landing(0, sl(0, 16), true))
	assert.Equal(t, int64(5), g.Landing(1, word, true))
	assert.Equal(t, int64(1), g.Landing(0, region, false))
	assert.True(t, sl(8, 0).Within(region))
	assert.False(t, sl(8, 1).Within(region))
	assert.False(t, ir.Slice{Buf: 1, Off: 4, Len: 1}.Within(region))
}
