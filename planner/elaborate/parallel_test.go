package elaborate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// elaborateBoth elaborates f one rank after the other, then in shards of ranks (forced, whatever
// the size of the plan) and checks that both give the same Graph, or the same diagnostics.
func elaborateBoth(t *testing.T, f *dsl.File, params map[string]int64) (g *ir.Graph, sharded bool, err error) {
	t.Helper()
	return elaborateBothWith(t, f, params, Options{})
}

// elaborateBothWith is elaborateBoth with options beside the workers.
func elaborateBothWith(t *testing.T, f *dsl.File, params map[string]int64, opt Options) (g *ir.Graph, sharded bool, err error) {
	t.Helper()
	opt.Workers = 1
	seq, sharded, errSeq := elaborate(t.Context(), f, params, opt)
	require.False(t, sharded)
	opt.Workers, opt.parallelSet, opt.parallelOps = 3, true, 0
	par, sharded, errPar := elaborate(t.Context(), f, params, opt)
	if errSeq != nil {
		require.Error(t, errPar, "%v: sequential fails, parallel does not", params)
		require.Equal(t, errSeq.Error(), errPar.Error(), "%v", params)
		return nil, sharded, errSeq
	}
	require.NoError(t, errPar, "%v", params)
	for i := range seq.Buffers { // functions are equal only when nil
		assert.Equal(t, seq.Buffers[i].Init == nil, par.Buffers[i].Init == nil)
		seq.Buffers[i].Init, par.Buffers[i].Init = nil, nil
	}
	require.Equal(t, seq.Rank, par.Rank, "%v", params)
	require.Equal(t, seq.Queues, par.Queues, "%v", params)
	require.Equal(t, seq.Edges, par.Edges, "%v", params)
	require.Equal(t, seq.Ops, par.Ops, "%v", params)
	require.Equal(t, seq, par, "%v", params)
	return par, sharded, nil
}

// Every plan of plans/ elaborates in shards to the Graph it elaborates to sequentially, with its
// root (if any) first or last: rank 0 then has other ops than the rest.
func TestParallelPlans(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "plans", "*.dag"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		f, err := dsl.Parse(filepath.Base(file), src)
		require.NoError(t, err)
		t.Run(filepath.Base(file), func(t *testing.T) {
			built := 0
			for _, ranks := range []int64{3, 4, 7, 8, 32} {
				params := map[string]int64{"ranks": ranks}
				if g, sharded, err := elaborateBoth(t, f, params); err == nil {
					built++
					assert.True(t, sharded || g.Rank[0].EndOp == 0, "%v: not elaborated in shards", params)
				}
				if strings.Contains(string(src), "param root") {
					params["root"] = ranks - 1
					elaborateBoth(t, f, params)
				}
			}
			assert.NotZero(t, built, "no size elaborates: the comparison compared only errors")
		})
	}
}

// Plans whose ranks have different numbers of ops: the shards outgrow or underfill the room
// sized from rank 0, and their parts move left, move right or are copied.
func TestParallelUneven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, ops string }{
		{"rank 0 has the most", "ranks - rank"},
		{"rank 0 has the fewest", "1 + rank"},
		{"early ranks have the most", "if rank == 0 then 10 else if rank < ranks / 4 then 15 else 2"},
		{"some ranks have none", "if rank % 3 == 1 then 0 else 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(`plan p
param ranks = 40
buffer a u8[64] remote_write
queue q to (rank + 1) %% ranks peer r
queue r to (rank + ranks - 1) %% ranks peer q
let k = %s
for i in 0 .. k {
	op s[i] = send q a[0:1]
	op v[i] = recv r a[1:2] after s[i]
	op w[i] = nop after s[i], v[i]
}
`, tc.ops)
			f, err := dsl.Parse("t.dag", []byte(src))
			require.NoError(t, err)
			g, _, err := elaborateBoth(t, f, nil)
			require.Error(t, err) // sends and recvs do not match where k differs
			assert.Nil(t, g)
			// Without messages, the ranks need not agree.
			f, err = dsl.Parse("t.dag", []byte(strings.NewReplacer("send q", "copy a[2:3] to", "recv r", "copy a[3:4] to").Replace(src)))
			require.NoError(t, err)
			g, sharded, err := elaborateBoth(t, f, nil)
			require.NoError(t, err)
			assert.True(t, sharded)
			assert.NotEmpty(t, g.Edges)
		})
	}
}

// A mistake late in the ranks, or on several of them with different figures, is reported as the
// sequential run reports it: the shards stop and the ranks are elaborated again in order.
func TestParallelErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, want string }{
		{"unknown queue on one late rank", "if rank == 37 { op y = send nosuch a[0:1] }", "queue nosuch is not defined on this rank"},
		{"out of range on several ranks", "op y = copy a[rank:rank+1] to a[0:1]", "starts out of range"},
		{"assert on the last rank", "assert rank < ranks - 1, \"last\"", "assertion failed: last"},
		{"op declared twice late", "if rank > 30 { op x[0] = nop }", "declared twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "plan p\nparam ranks = 40\nbuffer a u8[35]\nfor i in 0 .. 3 { op x[i] = nop }\n" + tc.body + "\n"
			f, err := dsl.Parse("t.dag", []byte(src))
			require.NoError(t, err)
			_, _, err = elaborateBoth(t, f, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// The op limit, passed by the shards together though by none alone, is reported as it is
// sequentially; a plan right at the limit is still elaborated in shards.
func TestParallelOpLimit(t *testing.T) {
	t.Parallel()
	f, err := dsl.Parse("t.dag", []byte("plan p\nparam ranks = 64\nfor i in 0 .. 200 { op x[i] = nop }\n"))
	require.NoError(t, err)
	for _, limit := range []int{64 * 200, 64*200 - 1, 30 * 200, 64 * 200 * 2} {
		_, sharded, err := elaborateBothWith(t, f, nil, Options{MaxOps: limit})
		assert.Equal(t, limit < 64*200, err != nil, "limit %d: %v", limit, err)
		assert.Equal(t, limit >= 64*200, sharded, "limit %d: shards take what ranks as large as rank 0 need, and no more", limit)
	}
}

// The workers share the remembered results of defs: Swing's block sets, computed by recursive
// defs, give the Graph of the sequential run, and of the run that remembers nothing, and a
// failed call limit is reported as it is without shards (run with -race: the workers write and
// read the same blocks).
func TestParallelDefs(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "scale", "swing_allreduce.dag"))
	require.NoError(t, err)
	f, err := dsl.Parse("swing_allreduce.dag", src)
	require.NoError(t, err)
	for _, ranks := range []int64{16, 64} {
		params := map[string]int64{"ranks": ranks, "n": 1}
		g, sharded, err := elaborateBoth(t, f, params)
		require.NoError(t, err)
		assert.True(t, sharded)
		plain, _, err := elaborate(t.Context(), f, params, Options{noMemo: true, Workers: 1})
		require.NoError(t, err)
		require.Equal(t, len(plain.Ops), len(g.Ops))
		for i := range plain.Ops {
			require.Equal(t, plain.Ops[i].Name, g.Ops[i].Name)
		}
	}
	// A def whose calls pass MaxCalls on the later ranks only, after others were remembered.
	deep, err := dsl.Parse("t.dag", []byte(`plan p
param ranks = 24
def fib(n) = if n < 2 then n else fib(n - 1) + fib(n - 2)
buffer b u8[8]
for i in 0 .. 40 {
	let x = fib(i % 7 + (if rank > 20 then 20 else 0))
	op o[i] = nop
}
let y = fib(rank)
`))
	require.NoError(t, err)
	_, _, err = elaborateBoth(t, deep, nil)
	require.ErrorContains(t, err, "more than 65536 function calls in one expression")
}
