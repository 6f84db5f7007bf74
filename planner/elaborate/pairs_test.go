package elaborate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

// A reduce or copy over lists pairs its blocks in order: one host op per pair and a nop under
// the op's name, which what names the op waits for; its after list and the dependency
// statements that name it hold back every part.
func TestPairedLists(t *testing.T) {
	t.Parallel()
	src := `plan p
param ranks = 1
buffer data i64[16]
buffer tmp i64[16]
buffer out i64[8]
op x = nop
op r = reduce sum {data[b * 4 : b * 4 + 4] for b in 0 .. 4 if b % 2 == 1} from tmp[0:4], tmp[8:12] after x
op c = copy {data[b * 4 : b * 4 + 4] for b in 0 .. 4 if b % 2 == 1} to {out[k * 4 : k * 4 + 4] for k in 0 .. 2}
op e = copy {data[b : b] for b in 0 .. 2} to out[0:0], out[1:1] # nothing to move: the nop alone
c after r
op done = nop after c, e
`
	g, msg := elab(t, src, nil)
	require.Empty(t, msg)
	var kinds []ir.OpKind
	var names []string
	for _, op := range g.Ops {
		kinds = append(kinds, op.Kind)
		names = append(names, op.Name)
	}
	assert.Equal(t, []string{"x", "r", "r", "r", "c", "c", "c", "e", "done"}, names)
	assert.Equal(t, []ir.OpKind{ir.OpNop, ir.OpReduce, ir.OpReduce, ir.OpNop, ir.OpCopy, ir.OpCopy, ir.OpNop, ir.OpNop, ir.OpNop}, kinds)
	assert.Equal(t, ir.Slice{Buf: 0, Off: 12, Len: 4}, g.Ops[2].Dst)
	assert.Equal(t, ir.Slice{Buf: 1, Off: 8, Len: 4}, g.Ops[2].Src)
	edges := map[[2]int]bool{}
	for _, e := range g.Edges {
		edges[[2]int{int(e.From), int(e.To)}] = true
	}
	for _, e := range [][2]int{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {3, 5}, {4, 6}, {5, 6}, {6, 8}, {7, 8}} {
		assert.True(t, edges[e], "edge %v", e)
	}
	assert.Len(t, g.Edges, 10)

	for _, tc := range []struct{ body, want string }{
		{"op r = reduce sum data[0:4], data[4:8] from tmp[0:4]", "t.dag:6:45: reduce sum between tmp[0:4] (32 bytes) and a list of 2 blocks (64 bytes): the one slice is cut into the list's blocks"},
		{"op r = reduce sum data[0:4], data[4:8] from {tmp[j] for j in 0 .. 7}", "t.dag:6:45: reduce sum of 2 destination blocks from 7 source blocks: the lists pair their blocks in order"},
		{"op c = copy {data[j * 2] for j in 0 .. 4} to out[0:4]", ""}, // packs
		{"op c = copy tmp[0:2] to {out[j * 2] for j in 0 .. 2}", ""},  // unpacks
		{"op c = copy data[0:2], data[4:6] to wide[0:32]", ""},        // into whole elements of u8
		{"op c = copy wide[0:12], wide[12:16] to data[0:2]", "t.dag:6:40: copy between data[0:2] and a block of 12 bytes (wide[0:12]): the blocks must be whole elements of data"},
		{"op r = reduce sum data[0:4], data[4:8] from tmp[0:4], tmp[4:7]", "t.dag:6:55: block 1 of the lists: reduce sum of 4 elements (data[4:8]) from 3 elements (tmp[4:7])"},
		{"op r = reduce sum data[0:4], data[2:6] from tmp[0:4], tmp[4:8]", "t.dag:6:30: reduce sum writes data[0:4] and data[2:6], which overlap"},
		{"op r = reduce sum data[0:4], data[4:8] from tmp[0:4], data[4:8]", "reduce sum writes data[4:8], which overlaps its source block data[4:8]"},
		{"op r = reduce sum data[0:4], data[4:8] from tmp[0:4], wide[0:4]", "block 1 of the lists: reduce sum into data[4:8] from wide[0:4]: both sides need the same type (i64 and u8)"},
		{"op c = copy data[0:4], data[4:8] to wide[0:32], wide[32:64]", ""},
		{"op c = copy data[0:4], data[4:8] to wide[0:32], wide[32:63]", "block 1 of the lists: copy of 32 bytes (data[4:8]) into 31 bytes (wide[32:63])"},
		{"op c = copy {data[j] for j in 0 .. 3} to out[0:1], out[1:2], out[9:10]", "t.dag:6:66: slice out[9:10] starts out of range (out has 8 elements)"},
	} {
		_, msg := elab(t, "plan t\nbuffer data i64[16]\nbuffer tmp i64[16]\nbuffer out i64[8]\nbuffer wide u8[64]\n"+tc.body+"\n", nil)
		if tc.want == "" {
			assert.Empty(t, msg, tc.body)
			continue
		}
		assert.Contains(t, msg, tc.want, tc.body)
	}
}
