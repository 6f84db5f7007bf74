package verify

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
)

// loadPlan parses and elaborates a plan file without running Check, so tests can inspect or
// mutate the Graph before verifying it.
func loadPlan(t testing.TB, path string, params map[string]int64) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := dsl.Parse(path, src)
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, params, elaborate.Options{})
	require.NoError(t, err)
	return g
}

// planRanks are the world sizes every plan in plans/ must verify cleanly at; plans that need a
// power of two skip the others.
var planRanks = []int64{2, 3, 4, 8}

func planFiles(t testing.TB) []string {
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// elaborates reports whether the plan accepts the world size (recursive doubling needs a power of two).
func elaborates(path string, ranks int64) bool {
	src, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	f, err := dsl.Parse(path, src)
	if err != nil {
		return false
	}
	_, err = elaborate.Elaborate(context.Background(), f, map[string]int64{"ranks": ranks}, elaborate.Options{})
	return err == nil
}

func TestVerifyPlansClean(t *testing.T) {
	t.Parallel()
	for _, path := range planFiles(t) {
		for _, ranks := range planRanks {
			name := strings.TrimSuffix(filepath.Base(path), ".dag")
			t.Run(name+"/ranks="+strconv.FormatInt(ranks, 10), func(t *testing.T) {
				if !elaborates(path, ranks) {
					t.Skipf("%s does not support ranks=%d", name, ranks)
				}
				g := loadPlan(t, path, map[string]int64{"ranks": ranks})
				require.Empty(t, Check(t.Context(), g), "plan %s at ranks=%d", name, ranks)
				require.Empty(t, Races(t.Context(), g))
			})
		}
	}
}

// Races calls idle, at the latest when it returns, also when there is nothing to search.
func TestRacesIdle(t *testing.T) {
	t.Parallel()
	g := loadPlan(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 8})
	for _, g := range []*ir.Graph{g, {}} {
		errs, o := CheckDeadlocks(t.Context(), g)
		require.Empty(t, errs)
		idle := 0
		require.Empty(t, o.Races(t.Context(), func() { idle++ }))
		require.NotZero(t, idle, "idle not called")
	}
}

// BenchmarkVerifyRing is the verification of the ring allreduce at 256 ranks, step by step:
// CheckDeadlocks (the happens-before graph, its order, and the race search's accesses beside
// it), then Races; ns/planop is per op of the plan.
func BenchmarkVerifyRing(b *testing.B) {
	g := loadPlan(b, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 256})
	perOp := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Ops)), "ns/planop")
	}
	b.Run("deadlocks", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if errs, _ := CheckDeadlocks(b.Context(), g); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
		perOp(b)
	})
	b.Run("races", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			_, o := CheckDeadlocks(b.Context(), g)
			b.StartTimer()
			if errs := o.Races(b.Context(), nil); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
		perOp(b)
	})
}
