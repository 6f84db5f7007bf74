package prove_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

// reduceScatterV is a ring reduce-scatter over blocks of 1, 2 and 3 elements (counts c), whose
// rank-r block is copied into out, MPI's receive buffer; keep names the block copied.
func reduceScatterV(keep string) string {
	return `plan rsv
param ranks = 4
let c = [1 + q % 3 for q in 0 .. ranks]
def off(q) = if q == 0 then 0 else off(q - 1) + 1 + (q - 1) % 3
buffer data u32[off(ranks)] init rank * 10 + i
buffer tmp  u32[3]
buffer out  u32[3]
queue right to (rank + 1) % ranks peer left
queue left  to (rank - 1) % ranks peer right
expect reduce_scatter sum out counts c from data
for s in 0 .. ranks - 1 {
  let sc = (rank - s - 1) % ranks
  let rc = (rank - s - 2) % ranks
  op tx[s]  = send right data[off(sc) : off(sc) + c[sc]]
  op rx[s]  = recv left tmp[0 : c[rc]]
  op red[s] = reduce sum data[off(rc) : off(rc) + c[rc]] from tmp[0 : c[rc]] after rx[s]
  if s > 0 { tx[s], rx[s] after red[s - 1] }
}
let b = ` + keep + `
op keep = copy data[off(b) : off(b) + 1] to out[0:1] after red[ranks - 2]
if c[b] > 1 { op more = copy data[off(b) + 1 : off(b) + c[b]] to out[1 : c[b]] after red[ranks - 2] }
`
}

// gatherV reads block p of c[p] elements from rank p into all at d[p], with gaps between the
// blocks; at is where block p lands.
func gatherV(at string) string {
	return `plan gv
param ranks = 4
let c = [q + 1 for q in 0 .. ranks]
let d = [q * ranks + 1 for q in 0 .. ranks]
buffer mine u32[ranks] remote_read init rank * 10 + i
buffer all  u32[ranks * ranks + 1]
if rank == 0 {
  op own = copy mine[0:1] to all[1:2]
  for p in 1 .. ranks {
    queue pull[p] to p peer back
    op take[p] = read pull[p] mine[0 : c[p]] to all[` + at + ` : ` + at + ` + c[p]]
  }
} else {
  queue back to 0 peer pull[rank]
}
expect gatherv all counts c displs d from mine root 0
`
}

// scatterV writes block p of src, c[p] elements packed in rank order, into rank p's dst; from
// is where the root takes block p.
func scatterV(from string) string {
	return `plan sv
param ranks = 4
let c = [2 + q % 2 for q in 0 .. ranks]
def off(q) = if q == 0 then 0 else off(q - 1) + 2 + (q - 1) % 2
buffer src u32[off(ranks)] init rank * 100 + i
buffer dst u32[3] remote_write
if rank == 0 {
  op own = copy src[0:2] to dst[0:2]
  for p in 1 .. ranks {
    queue push[p] to p peer got
    op put[p] = write push[p] src[` + from + ` : ` + from + ` + c[p]] to dst[0 : c[p]] notify
  }
} else {
  queue got to 0 peer push[rank]
  op land = recv got
}
expect scatterv dst from src counts c root 0
`
}

// TestVectorForms: each vector form is proven for a plan that computes it, at several world
// sizes, and fails, at its statement and naming the wrong element, for one that does not.
func TestVectorForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		good, bad string
		line      int
		msg       string
	}{
		{"reduce_scatter", reduceScatterV("rank"), reduceScatterV("(rank + 1) % ranks"), 10,
			"out[0] on rank 0 (in rank 0's block, out[0:1] = the sum over ranks of data[0:1]) should hold the sum over ranks 0-3 of data[0], but holds the sum over ranks 0, 2, 3 of data[1] — another element's contributions"},
		{"gatherv", gatherV("d[p]"), gatherV("(d[p] - 1)"), 16,
			"all[5] on rank 0 (in the block from rank 1, all[5:7] = mine[0:2]@1) should hold mine[0]@1, but holds mine[1]@1"},
		{"scatterv", scatterV("off(p)"), scatterV("(off(p) - 1)"), 17,
			"dst[0] on rank 1 (in the block from rank 0, dst[0:3] = src[2:5]@0) should hold src[2]@0, but holds src[1]@0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ranks := range []int64{2, 3, 4, 8} {
				require.Empty(t, load(t, tc.good, map[string]int64{"ranks": ranks}), "ranks=%d", ranks)
			}
			errs := load(t, tc.bad, nil)
			require.Len(t, errs, 1)
			require.Equal(t, diag.Expect, errs[0].Code)
			require.Equal(t, tc.line, int(errs[0].Pos.Line))
			require.Contains(t, errs[0].Msg, tc.msg)
		})
	}
}

// TestAllgathervInPlace: without `from`, block q of allgatherv's destination comes from rank
// q's own block of it, where the displacements put it.
func TestAllgathervInPlace(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allgatherv.dag")
	require.NoError(t, err)
	in := strings.NewReplacer(
		"op own = copy mine[0:size[rank]] to all[start[rank] : start[rank] + size[rank]]", "op own = nop",
		"expect allgatherv all counts size displs start from mine", "expect allgatherv all counts size displs start",
	).Replace(string(src))
	require.NotEqual(t, string(src), in)
	for _, ranks := range []int64{2, 3, 4} {
		require.Empty(t, load(t, in, map[string]int64{"ranks": ranks}), "ranks=%d", ranks)
	}
	// The plan with a copy from mine does not compute the in-place form.
	mixed := strings.Replace(string(src), "displs start from mine", "displs start", 1)
	errs := load(t, mixed, nil)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Msg, "all[0] on rank 0 (in the block from rank 0, all[0:16] = all[0:16]@0) should hold all[0]@0, but holds mine[0]@0")
}
