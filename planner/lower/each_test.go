package lower_test

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// TestCompileEachListsAsCompile streams the listing of every plan through CompileEach, with
// more workers than ranks and fewer, and expects Compile's listing byte for byte, every rank
// handed over once and in order.
func TestCompileEachListsAsCompile(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		g := load(t, f, map[string]int64{"ranks": 8})
		for _, target := range []string{"connectx", "connectx-inline", "generic", "triggered"} {
			tg, err := ir.LookupTarget(target)
			require.NoError(t, err)
			want := listingOrError(g, tg)
			var wantJSON bytes.Buffer
			if whole, err := lower.Compile(t.Context(), g, tg); err == nil {
				require.NoError(t, listing.WriteJSON(&wantJSON, whole, listing.Options{}))
			}
			for _, asJSON := range []bool{false, true} {
				var b bytes.Buffer
				lw := listing.NewWriter(&b, listing.Options{})
				if asJSON {
					lw = listing.NewJSONWriter(&b, listing.Options{})
				}
				var handed []int
				p, err := lower.CompileEach(t.Context(), g, tg, func(p *ir.Plan, r int) func() error {
					b := lw.Render(p, r)
					return func() error {
						handed = append(handed, r)
						return lw.Emit(p, b)
					}
				})
				if err != nil {
					assert.True(t, strings.HasPrefix(want, "compile error:"), "%s on %s: %v", f, target, err)
					continue
				}
				require.NoError(t, lw.Close(p))
				if asJSON {
					assert.Equal(t, wantJSON.String(), b.String(), "%s on %s, JSON", f, target)
				} else {
					assert.Equal(t, want, b.String(), "%s on %s", f, target)
				}
				for i, r := range handed {
					require.Equal(t, i, r, "%s on %s: ranks handed over out of order", f, target)
				}
				assert.Len(t, handed, g.Ranks)
			}
		}
	}
}

// TestCompileEachErrors: CompileEach gives Compile's diagnostics when a rank breaks a limit,
// and stops handing ranks over at the first error of its callback, which it returns.
func TestCompileEachErrors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	src := []byte(`plan shallow
param ranks = 6
buffer a f32[4]
buffer b f32[16]
queue right to (rank + 1) % ranks peer left depth 2
queue left to (rank - 1) % ranks peer right depth 2
for s in 0 .. 4 {
  op tx[s] = send right a
  op rx[s] = recv left b[s * 4 : (s + 1) * 4]
}
`)
	g, err := planner.Load(t.Context(), "shallow.dag", src, nil, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	_, want := lower.Compile(t.Context(), g, tg)
	require.Error(t, want)
	_, got := lower.CompileEach(t.Context(), g, tg, func(*ir.Plan, int) func() error { return nil })
	assert.Equal(t, want.Error(), got.Error())

	deep := bytes.ReplaceAll(src, []byte("depth 2"), []byte("depth 64"))
	g, err = planner.Load(t.Context(), "deep.dag", deep, nil, planner.Options{})
	require.NoError(t, err)
	full := errors.New("disk full")
	calls := 0
	_, got = lower.CompileEach(t.Context(), g, tg, func(_ *ir.Plan, r int) func() error {
		return func() error {
			calls++
			if r == 2 {
				return full
			}
			return nil
		}
	})
	assert.ErrorIs(t, got, full)
	assert.Equal(t, 3, calls, "ranks emitted after an emit failed")
}

// TestCompileRankSpans: a Graph whose rank spans do not tile its ops is refused with a
// diagnostic, not lowered into the wrong rank's events.
func TestCompileRankSpans(t *testing.T) {
	t.Parallel()
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	bad := g.Clone()
	bad.Rank[1].FirstOp++
	bad.Freeze()
	_, err = lower.Compile(t.Context(), bad, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rank spans")
	bad = g.Clone()
	bad.Ops[0].Rank = 2
	bad.Freeze()
	_, err = lower.Compile(t.Context(), bad, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "outside the span of its rank 2")
	// Lowering finds an op's neighbours on its queue side by the op's Index.
	bad = g.Clone()
	q := &bad.Queues[0]
	q.SendOps[0], q.SendOps[1] = q.SendOps[1], q.SendOps[0]
	bad.Freeze()
	_, err = lower.Compile(t.Context(), bad, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not listed by its queue at its index")
	bad = g.Clone()
	bad.Queues[0].SendOps = append(bad.Queues[0].SendOps, ir.OpID(len(bad.Ops)))
	bad.Freeze()
	_, err = lower.Compile(t.Context(), bad, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lists an op that does not exist")
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

func (f *failAfter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		k := f.n
		f.n = 0
		return k, errors.New("disk full")
	}
	f.n -= len(b)
	return len(b), nil
}

// TestWriteError: listing.Write and WriteJSON, rendering ranks on several goroutines, return
// the first write error and stop (they wait for their goroutines), not waiting forever.
func TestWriteError(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 64})
	p := compileFor(t, g, "connectx")
	var full bytes.Buffer
	require.NoError(t, listing.Write(&full, p, listing.Options{}))
	for _, write := range []func(io.Writer, *ir.Plan, listing.Options) error{listing.Write, listing.WriteJSON} {
		err := write(&failAfter{n: full.Len() / 3}, p, listing.Options{})
		assert.EqualError(t, err, "disk full")
	}
}

// A Prepared lowering gives CompileEach's result once; used again it refuses, and with no
// callback it still lowers (and checks) every rank.
func TestPreparedOnce(t *testing.T) {
	t.Parallel()
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	whole, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	pr := lower.PrepareEach(t.Context(), g, tg)
	p, err := pr.CompileEach(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, whole.Stats, p.Stats)
	_, err = pr.CompileEach(t.Context(), nil)
	assert.ErrorContains(t, err, "compiles once")

	shallow := tg
	shallow.MaxWQDepth = 2
	_, err = lower.PrepareEach(t.Context(), g, shallow).CompileEach(t.Context(), nil)
	assert.ErrorContains(t, err, "depth")
}

// Prepared.CheckLimits gives CheckLimits' verdict on the prepared order, and the Prepared still
// compiles after it, with Compile's statistics.
func TestPreparedCheckLimits(t *testing.T) {
	t.Parallel()
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	for _, name := range []string{"connectx", "connectx-inline", "triggered"} {
		tg, err := ir.LookupTarget(name)
		require.NoError(t, err)
		whole, err := lower.Compile(t.Context(), g, tg)
		require.NoError(t, err)
		pr := lower.PrepareEach(t.Context(), g, tg)
		require.NoError(t, pr.CheckLimits(t.Context()), name)
		p, err := pr.CompileEach(t.Context(), nil)
		require.NoError(t, err, name)
		assert.Equal(t, whole.Stats, p.Stats, name)
		assert.ErrorContains(t, pr.CheckLimits(t.Context()), "once", name)

		shallow := tg
		shallow.MaxCQDepth = 1 // a limit only lowering finds, not the input checks
		want := lower.CheckLimits(t.Context(), g, shallow)
		require.Error(t, want, name)
		assert.Equal(t, want, lower.PrepareEach(t.Context(), g, shallow).CheckLimits(t.Context()), name)
	}
}
