package elaborate

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/race"
	"github.com/coredag/coredag/ir"
)

func elaborateSrc(t testing.TB, src string, params map[string]int64) (*ir.Graph, error) {
	t.Helper()
	return elaborateWith(t, src, params, Options{})
}

// elaborateWith is elaborateSrc with options.
func elaborateWith(t testing.TB, src string, params map[string]int64, opt Options) (*ir.Graph, error) {
	t.Helper()
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	return Elaborate(t.Context(), f, params, opt)
}

// ringAllreduce is docs/language.md's example (§9), the plan the benchmarks are specified on.
func ringAllreduce(t testing.TB) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "plans", "ring_allreduce.dag"))
	require.NoError(t, err)
	return src
}

func TestElaborateRingAllreduce(t *testing.T) {
	t.Parallel()
	for _, ranks := range []int{1, 2, 3, 4, 8} {
		f, err := dsl.Parse("ring_allreduce.dag", ringAllreduce(t))
		require.NoError(t, err)
		g, err := Elaborate(t.Context(), f, map[string]int64{"ranks": int64(ranks)}, Options{})
		require.NoError(t, err, "ranks=%d", ranks)
		steps := ranks - 1
		assert.Len(t, g.Ops, ranks*5*steps, "ranks=%d: 3 ops per reduce-scatter step, 2 per allgather step", ranks)
		assert.Len(t, g.Queues, 2*ranks)
		for r := 0; r < ranks; r++ {
			first, end := g.RankOps(r)
			for id := first; id < end; id++ {
				op := &g.Ops[id]
				assert.Equal(t, r, int(op.Rank))
				if op.Kind == ir.OpSend || op.Kind == ir.OpRecv || (op.Kind == ir.OpWrite && op.Notify) {
					require.NotEqual(t, ir.OpID(ir.None), op.Match, "%s unmatched", g.OpString(id))
					m := &g.Ops[op.Match]
					assert.Equal(t, id, m.Match, "matching is symmetric")
					if op.Kind == ir.OpRecv {
						assert.Equal(t, (r+ranks-1)%ranks, int(m.Rank), "recv on left gets from the left neighbour")
					} else {
						assert.Equal(t, (r+1)%ranks, int(m.Rank))
					}
				}
			}
		}
		for i := range g.Queues {
			q := &g.Queues[i]
			require.NotEqual(t, ir.QueueID(ir.None), q.Peer)
			assert.Equal(t, ir.QueueID(i), g.Queues[q.Peer].Peer, "pairing is mutual")
		}
	}
}

func TestElaborateSemantics(t *testing.T) {
	t.Parallel()
	g, err := elaborateSrc(t, `plan p
param ranks = 2
param n = 4
let half = n / 2
buffer a u64[n] remote_write remote_atomic init rank * 10 + i
buffer f f32[half] init 0.5 * i
queue q to 1 - rank depth 8
op w = write q a[0:half] to a[half:n] after z     # forward reference
op z = nop
if rank == 0 { op k = atomic add q a[1] 5 to a[3] } else { op k = atomic cas q a[0] (1) 2 }
for j in 0 .. 5 step 2 { op s[j] = nop after w }
s[4], k after s[0], s[2]
`, nil)
	require.NoError(t, err)
	require.Equal(t, 2, g.Ranks)
	byName := map[string]*ir.Op{}
	first, end := g.RankOps(0)
	for id := first; id < end; id++ {
		byName[g.Ops[id].Name] = &g.Ops[id]
	}
	require.Contains(t, byName, "s[4]")
	assert.NotContains(t, byName, "s[1]")
	w := byName["w"]
	assert.Equal(t, ir.OpWrite, w.Kind)
	assert.Equal(t, ir.Slice{Buf: 0, Off: 0, Len: 2}, w.Src)
	assert.Equal(t, int64(2), w.Dst.Off)
	k := byName["k"]
	assert.Equal(t, ir.OpAtomicAdd, k.Kind)
	assert.Equal(t, int64(5), k.A())
	assert.Equal(t, int64(3), k.Fetch().Off)
	assert.Equal(t, 8, g.Queues[w.Queue].Depth)
	edges := map[string]bool{}
	for _, e := range g.Edges {
		if g.Ops[e.From].Rank == 0 {
			edges[g.Ops[e.From].Name+"->"+g.Ops[e.To].Name] = true
		}
	}
	for _, want := range []string{"z->w", "w->s[0]", "w->s[2]", "w->s[4]", "s[0]->s[4]", "s[2]->s[4]", "s[0]->k", "s[2]->k"} {
		assert.True(t, edges[want], "missing edge %s in %v", want, edges)
	}
	// init: rank*10 + i for u64, 0.5*i for f32, evaluated per rank at run time
	buf := make([]byte, g.Buffers[0].Bytes())
	require.NoError(t, g.Buffers[0].Init(1, buf))
	assert.Equal(t, uint64(13), binary.LittleEndian.Uint64(buf[24:]))
	fb := make([]byte, g.Buffers[1].Bytes())
	require.NoError(t, g.Buffers[1].Init(0, fb))
	assert.Equal(t, float32(0.5), math.Float32frombits(binary.LittleEndian.Uint32(fb[4:])))
}

// TestExternBuffer: extern reaches ir.Buffer, its count may come from a param bound at open, and
// its init still fills it for coredag's own runs.
func TestExternBuffer(t *testing.T) {
	t.Parallel()
	src := "plan p\nparam count = 4\nbuffer data u32[count] extern remote_write init rank + i\nbuffer tmp u32[count]\n"
	g, err := elaborateSrc(t, src, map[string]int64{"count": 6})
	require.NoError(t, err)
	require.Len(t, g.Buffers, 2)
	assert.True(t, g.Buffers[0].Extern)
	assert.Equal(t, int64(6), g.Buffers[0].Count)
	assert.Equal(t, ir.RemoteWrite, g.Buffers[0].Access)
	assert.False(t, g.Buffers[1].Extern, "scratch buffers stay coredag's")
	b := make([]byte, g.Buffers[0].Bytes())
	require.NoError(t, g.Buffers[0].Init(1, b))
	assert.Equal(t, uint32(6), binary.LittleEndian.Uint32(b[20:]))
}

func TestInitWraps(t *testing.T) {
	t.Parallel()
	g, err := elaborateSrc(t, "plan p\nbuffer b u8[3] init -1\nbuffer c i32[2] init rank + 7\n", nil)
	require.NoError(t, err)
	b := make([]byte, 3)
	require.NoError(t, g.Buffers[0].Init(0, b))
	assert.Equal(t, []byte{255, 255, 255}, b, "integers wrap modulo 2^bits")
	c := make([]byte, 8)
	require.NoError(t, g.Buffers[1].Init(0, c))
	assert.Equal(t, []byte{7, 0, 0, 0, 7, 0, 0, 0}, c)
}

func TestElaborateDiagnostics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		params    map[string]int64
		want      []string // "line:col: substring" in order
	}{
		{"one report for all ranks", "plan p\nparam ranks = 4\nop a = nop after b\n", nil,
			[]string{"3:18: unknown op b"}},
		{"ranks listed when not all", "plan p\nparam ranks = 4\nif rank > 1 { op a = nop after b }\n", nil,
			[]string{"3:32: unknown op b (on ranks 2, 3)"}},
		{"phases stop later phases", "plan p\nbuffer x u8[4]\nop a = copy x[0:9] to x[0:2]\nop b = nop after zz\n", nil,
			[]string{"4:18: unknown op zz"}},
		{"unknown param override", "plan p\nparam n = 1\n", map[string]int64{"m": 2},
			[]string{"m = 2: the plan has no param m (declared params: n)"}},
		{"ranks out of range", "plan p\nparam ranks = 0\n", nil, []string{"2:7: ranks = 0"}},
		{"runaway loop", "plan p\nfor i in 0 .. 1 << 40 { }\n", nil, []string{"2:1: the plan runs more than"}},
		{"step must be positive", "plan p\nfor i in 0 .. 4 step 0 { }\n", nil, []string{"2:22: for step 0"}},
		{"did you mean", "plan p\nbuffer data u8[4]\nop c = copy date[0:2] to data[2:4]\n", nil,
			[]string{"3:13: unknown buffer date (did you mean data?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := elaborateSrc(t, tc.src, tc.params)
			require.Error(t, err)
			list, ok := err.(diag.List)
			require.True(t, ok, "%T", err)
			var got []string
			for _, e := range list {
				got = append(got, fmt.Sprintf("%d:%d: %s", e.Pos.Line, e.Pos.Col, e.Text()))
			}
			require.Len(t, got, len(tc.want), "%q", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}

// BenchmarkElaborate parses and elaborates the ring allreduce with the front-end checks (names,
// shapes, matching); verification has BenchmarkCheck. Issue 2: ranks=256, about 326,000 ops,
// under 1 s, near-linear; issue 19: ranks=1024, 5.2M ops.
func BenchmarkElaborate(b *testing.B) {
	src := ringAllreduce(b)
	for _, ranks := range []int{64, 128, 256, 512, 1024} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			var ops int
			for i := 0; i < b.N; i++ {
				f, err := dsl.Parse("ring_allreduce.dag", src)
				if err != nil {
					b.Fatal(err)
				}
				g, err := Elaborate(b.Context(), f, map[string]int64{"ranks": int64(ranks)}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				ops = len(g.Ops)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ops), "ns/op-of-plan")
			b.ReportMetric(float64(ops), "plan-ops")
		})
	}
}

// TestElaborateAllocs: elaborating allocates per plan, not per op (issue 19): the ops, edges and
// queue lists grow in a few large steps, and the scopes of ifs and loops and the scatter/gather
// lists are reused. A list, a scope or a name allocated per op would make more than one per op.
func TestElaborateAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts differ under the race detector")
	}
	f, err := dsl.Parse("ring_allreduce.dag", ringAllreduce(t))
	require.NoError(t, err)
	ops := 0
	allocs := testing.AllocsPerRun(2, func() {
		g, err := Elaborate(t.Context(), f, map[string]int64{"ranks": 64}, Options{})
		require.NoError(t, err)
		ops = len(g.Ops)
	})
	assert.Less(t, allocs, float64(ops)/4, "allocations elaborating %d ops", ops)
}

func TestElaborateLimits(t *testing.T) {
	t.Parallel()
	lowOps := Options{MaxOps: 1000} // the real limit takes seconds and gigabytes to reach
	for _, tc := range []struct{ name, src, want string }{
		{"init divides by zero at one element", "plan p\nparam ranks = 2\nbuffer a u64[4] init 1 / (i - 1)\n",
			"3:24: division by zero in 1 / 0 in the init of buffer a"},
		{"init divides by zero on one rank", "plan p\nparam ranks = 3\nbuffer a u64[4] init 7 / (rank - 2)\n",
			"3:24: division by zero in 7 / 0 in the init of buffer a (on rank 2)"},
		{"buffer over 1 TiB", "plan p\nbuffer a u64[1 << 38]\n", "2:14: buffer a has 274877906944 elements of 8 bytes"},
		{"too many ops", "plan p\nfor i in 0 .. 1 << 40 { op n[i] = nop }\n", "2:1: the plan has more than 1000 ops over all its ranks (this loop alone makes at least 1099511627776)"},
		{"overlapping loopback write", "plan p\nparam ranks = 2\nbuffer a u8[4] remote_write\nqueue lo to rank\nop w = write lo a[0:3] to a[1:4]\n",
			"5:4: loopback write between overlapping slices a[0:3] and a[1:4]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := elaborateWith(t, tc.src, nil, lowOps)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A loopback write between disjoint slices is fine.
	_, err := elaborateWith(t, "plan p\nbuffer a u8[4] remote_write\nqueue lo to rank\nop w = write lo a[0:2] to a[2:4]\n", nil, lowOps)
	assert.NoError(t, err)
}

// A plan without `param ranks` has one rank, and `ranks` is 1 from its first statement on; with
// the param, a use before the declaration is an error like any other.
func TestRanksDefault(t *testing.T) {
	t.Parallel()
	g, err := elaborateSrc(t, "plan t\nlet k = ranks * 2\nbuffer a u8[k]\nop x = nop\n", nil)
	require.NoError(t, err)
	assert.Equal(t, 1, g.Ranks)
	assert.EqualValues(t, 2, g.Buffers[0].Count)
	_, err = elaborateSrc(t, "plan t\nlet k = ranks * 2\nparam ranks = 2\nop x = nop\n", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "t.dag:2:9: undefined: ranks")
}
