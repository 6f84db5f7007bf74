package elaborate

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/race"
)

// TestLoopOpsFailFast: a loop that would make more ops than the limit fails before it runs, at
// the loop, without building the ops.
func TestLoopOpsFailFast(t *testing.T) {
	defer func(n int) { maxOps = n }(maxOps)
	maxOps = 100000 // should the count regress, the ops made before the limit cost only megabytes
	for _, tc := range []struct{ name, src, want string }{
		{"one loop", "plan p\nfor j in 0 .. 10**9 { op x[j] = nop }\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 1000000000): is a loop bound or the rank count wrong?"},
		{"nested loops", "plan p\nfor i in 0 .. 3000 {\n  for j in 0 .. 3000 { op x[i,j] = nop }\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 9000000)"},
		{"inner bounds from the outer variable", "plan p\nfor i in 0 .. 3000 {\n  for j in 0 .. i { op x[i,j] = nop }\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 100"},
		{"inner bounds from a let", "plan p\nfor i in 0 .. 3000 {\n  let m = i * 2\n  for j in 0 .. m step 2 { op x[i,j] = nop }\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 100"},
		{"step and lets", "plan p\nfor i in 0 .. 10**12 step 2 {\n  let k = i + 1\n  op x[i] = nop\n  op y[k] = nop\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 1000000000000)"},
		{"the whole range of int64", "plan p\nfor i in -9223372036854775807 - 1 .. 9223372036854775807 { op x[i] = nop }\n",
			"(this loop alone makes at least 9223372036854775807)"},
		{"iterations without ops", "plan p\nfor i in 0 .. 10**9 { let k = i }\n",
			"2:1: the plan runs more than 16777216 loop iterations: is a bound wrong?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := elaborateSrc(t, tc.src, nil)
			runtime.ReadMemStats(&after)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if !race.Enabled {
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "allocated bytes")
			}
		})
	}
}

// TestLoopOpsLowerBound: the count before a loop is a lower bound: ops under an if, and inner
// loops whose bounds depend on the outer variable or a let of the body, are not counted, so
// plans within the limit still elaborate.
func TestLoopOpsLowerBound(t *testing.T) {
	defer func(n int) { maxOps = n }(maxOps)
	maxOps = 1000
	for _, src := range []string{
		"plan p\nfor i in 0 .. 10**6 { if i < 10 { op x[i] = nop } }\n",
		"plan p\nfor i in 0 .. 40 { for j in 0 .. i { op x[i,j] = nop } }\n",
		"plan p\nlet n = 10**6\nfor i in 0 .. 30 { let n = 30\n for j in 0 .. n { op x[i,j] = nop } }\n",
		"plan p\nfor i in 0 .. 1000 { op x[i] = nop }\n",
	} {
		_, err := elaborateSrc(t, src, nil)
		assert.NoError(t, err, src)
	}
	_, err := elaborateSrc(t, "plan p\nfor i in 0 .. 1001 { op x[i] = nop }\n", nil)
	assert.ErrorContains(t, err, "2:1: the plan has more than 1000 ops over all its ranks (this loop alone makes at least 1001)")
}

// TestLimitsFromBudget: a lower op limit (from the memory budget) says why it is lower.
func TestLimitsFromBudget(t *testing.T) {
	src := "plan p\nparam ranks = 4\nfor i in 0 .. 10 { op x[i] = nop }\n"
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	_, err = ElaborateLimited(f, nil, Limits{MaxOps: 25, Why: "the memory budget is 50 KiB"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "t.dag:3:1: the plan has more than 25 ops over all its ranks (this loop alone makes at least 10): the memory budget is 50 KiB")
	g, err := ElaborateLimited(f, nil, Limits{MaxOps: 40})
	require.NoError(t, err)
	assert.Len(t, g.Ops, 40)
	_, err = ElaborateLimited(f, nil, Limits{MaxOps: 1 << 30})
	assert.NoError(t, err, "a limit above MaxOps changes nothing")
}
