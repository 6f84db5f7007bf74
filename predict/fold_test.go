package predict_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/e2e"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/predict"
)

func parsePlan(t *testing.T, file string) *dsl.File {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "plans", file))
	require.NoError(t, err)
	f, err := dsl.Parse(file, src)
	require.NoError(t, err)
	return f
}

// foldAt elaborates the sampled ranks of f and folds them.
func foldAt(t *testing.T, f *dsl.File, ps map[string]int64, ranks []int) (*ir.Graph, predict.Symmetry, error) {
	t.Helper()
	s, err := elaborate.ElaborateRanks(t.Context(), f, ps, ranks, elaborate.Options{})
	require.NoError(t, err)
	return predict.Fold(predict.RankSample{Graph: s.Graph, Ranks: s.Ranks, PeerNames: s.PeerNames})
}

// simulateBoth predicts plan f op by op and folded onto rank 0, at several scales, and returns
// the times, in pairs.
func simulateBoth(t *testing.T, f *dsl.File, ranks int, tg ir.Target, par predict.Params, scales []float64) (full, folded []float64, sym predict.Symmetry) {
	t.Helper()
	ps := map[string]int64{"ranks": int64(ranks), "n": 1}
	g, err := elaborate.Elaborate(t.Context(), f, ps, elaborate.Options{})
	require.NoError(t, err)
	p, err := planner.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	fg, sym, err := foldAt(t, f, ps, predict.SampleRanks(ranks, 8))
	require.NoError(t, err)
	fp, err := planner.Compile(t.Context(), fg, tg)
	require.NoError(t, err)
	for _, k := range scales {
		a, err := predict.Simulate(t.Context(), p, par, predict.Options{Scale: k})
		require.NoError(t, err)
		b, err := predict.Simulate(t.Context(), fp, par, predict.Options{Scale: k})
		require.NoError(t, err)
		full, folded = append(full, a.Time), append(folded, b.Time)
		assert.Equal(t, a.Events, b.Events*ranks, "every rank handles as many events as rank 0")
	}
	return full, folded, sym
}

// The symmetric model (one rank, its peers folded onto itself) predicts what the op-by-op
// simulation of every rank predicts, to the last bit: the simulation orders simultaneous
// events the same way on every rank (eventLess). Under CI or COREDAG_E2E, at 256 and (the ring
// allreduce) 512 ranks too; -v prints the largest difference of each case.
func TestFoldAgrees(t *testing.T) {
	t.Parallel()
	worlds := []int{8, 64}
	if e2e.Enabled() {
		worlds = append(worlds, 256, 512)
	}
	par := predict.Default()
	par.Workers = 0
	for _, plan := range []string{"ring_allreduce.dag", "ring_allgather.dag", "recursive_doubling_allreduce.dag", "rabenseifner_allreduce.dag"} {
		f := parsePlan(t, plan)
		for _, ranks := range worlds {
			for _, target := range []string{"connectx", "connectx-inline", "generic", "triggered"} {
				if ranks > 256 && (plan != "ring_allreduce.dag" || target == "connectx-inline") {
					continue // 1.3 million ops each: the ring on three targets is enough
				}
				tg, err := ir.LookupTarget(target)
				require.NoError(t, err)
				name := fmt.Sprintf("%s/%d/%s", plan, ranks, target)
				full, folded, sym := simulateBoth(t, f, ranks, tg, par, []float64{1, 1024, 1 << 18})
				assert.Equal(t, ranks, sym.Ranks, name)
				worst := 0.0
				for i := range full {
					d := math.Abs(folded[i]/full[i] - 1)
					worst = max(worst, d)
					assert.Equal(t, full[i], folded[i], name)
				}
				t.Logf("%s: op by op %v ns, folded %v ns: largest difference %.2g%%", name, full, folded, 100*worst)
			}
		}
	}
}

// Fold finds the group a plan is symmetric under, and says which ranks it compared.
func TestFoldGroup(t *testing.T) {
	t.Parallel()
	_, sym, err := foldAt(t, parsePlan(t, "ring_allreduce.dag"), map[string]int64{"ranks": 6, "n": 1}, predict.SampleRanks(6, 8))
	require.NoError(t, err)
	assert.Equal(t, predict.Rotation, sym.Group)
	assert.True(t, sym.Complete(), "6 ranks: every one compared")
	_, sym, err = foldAt(t, parsePlan(t, "recursive_doubling_allreduce.dag"), map[string]int64{"ranks": 64, "n": 1}, predict.SampleRanks(64, 8))
	require.NoError(t, err)
	assert.Equal(t, predict.Xor, sym.Group)
	assert.False(t, sym.Complete())
	assert.Len(t, sym.Checked, 8)
}

// A plan whose ranks differ is refused, naming the difference; a difference on a rank that was
// not sampled is not seen (the sampled ranks are a check, not a proof).
func TestFoldRefuses(t *testing.T) {
	t.Parallel()
	_, _, err := foldAt(t, parsePlan(t, "double_binary_tree_allreduce.dag"), map[string]int64{"ranks": 16, "n": 1}, predict.SampleRanks(16, 8))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not symmetric: under rotation")
	src := `plan odd
param ranks = 64
param n = 4
buffer a u8[64 * n]
queue right to (rank + 1) % ranks peer left
queue left to (rank - 1) % ranks peer right
if rank == ODD { op s = send right a[0 : 2 * n] } else { op s = send right a[0 : n] }
op r = recv left a[n : 2 * n]
`
	sampled := predict.SampleRanks(64, 8)
	odd := 0
	for r := 3; odd == 0; r++ {
		if !slices.Contains(sampled, r) {
			odd = r
		}
	}
	for _, c := range []struct {
		odd  int
		want string
	}{{sampled[3], "moves"}, {odd, ""}} {
		f, err := dsl.Parse("odd.dag", []byte(strings.ReplaceAll(src, "ODD", fmt.Sprint(c.odd))))
		require.NoError(t, err)
		_, _, err = foldAt(t, f, nil, sampled)
		if c.want == "" {
			assert.NoError(t, err, "rank %d differs, but it was not sampled", c.odd)
			continue
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("rank %d's op s moves", c.odd))
	}
}

// SampleRanks takes every rank of a small world, and a fixed choice in a large one.
func TestSampleRanks(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, predict.SampleRanks(5, 8))
	s := predict.SampleRanks(16384, 8)
	assert.Len(t, s, 9)
	assert.Equal(t, []int{0, 1, 16383, 8192, 2}, s[:5])
	assert.Equal(t, s, predict.SampleRanks(16384, 8))
	seen := map[int]bool{}
	for _, r := range s {
		assert.False(t, seen[r])
		seen[r] = true
		assert.True(t, r >= 0 && r < 16384)
	}
}

// BenchmarkFoldRing16384 is the symmetric model of the ring allreduce of 16,384 ranks, as
// predict runs it for one size: nine ranks elaborated, folded, rank 0 compiled for generic
// and simulated.
func BenchmarkFoldRing16384(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "plans", "ring_allreduce.dag"))
	require.NoError(b, err)
	f, err := dsl.Parse("ring_allreduce.dag", src)
	require.NoError(b, err)
	tg, err := ir.LookupTarget("generic")
	require.NoError(b, err)
	ps := map[string]int64{"ranks": 16384, "n": 1}
	for b.Loop() {
		s, err := elaborate.ElaborateRanks(b.Context(), f, ps, predict.SampleRanks(16384, 8), elaborate.Options{})
		require.NoError(b, err)
		g, _, err := predict.Fold(predict.RankSample{Graph: s.Graph, Ranks: s.Ranks, PeerNames: s.PeerNames})
		require.NoError(b, err)
		p, err := planner.Compile(b.Context(), g, tg)
		require.NoError(b, err)
		_, err = predict.Simulate(b.Context(), p, predict.Default(), predict.Options{Scale: 1024})
		require.NoError(b, err)
	}
}

// TestFoldBadSample: a sample naming a rank the plan does not have, or a rank twice, is an
// error, not a panic or a claim that every rank was compared.
func TestFoldBadSample(t *testing.T) {
	t.Parallel()
	f := parsePlan(t, "ring_allreduce.dag")
	s, err := elaborate.ElaborateRanks(t.Context(), f, map[string]int64{"ranks": 8, "n": 1}, []int{0, 1}, elaborate.Options{})
	require.NoError(t, err)
	for _, c := range []struct {
		ranks []int
		want  string
	}{{[]int{0, 8}, "sampled rank 8 is not one of the plan's 8"}, {[]int{0, 1, 1}, "rank 1 is sampled twice"}, {[]int{0, -1}, "sampled rank -1"}} {
		_, _, err := predict.Fold(predict.RankSample{Graph: s.Graph, Ranks: c.ranks, PeerNames: s.PeerNames})
		require.Error(t, err, "%v", c.ranks)
		assert.Contains(t, err.Error(), c.want)
	}
}
