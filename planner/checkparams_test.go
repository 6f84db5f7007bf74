package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/planner/elaborate"
)

// TestCheckParams: the overrides a plan cannot take are a *ParamError from Load (a command-line
// mistake), worded as Elaborate words them among the diagnostics.
func TestCheckParams(t *testing.T) {
	t.Parallel()
	src := []byte("plan p\nparam ranks = 2\nparam n = 4\n")
	for _, tc := range []struct {
		params map[string]int64
		want   string
	}{
		{map[string]int64{"n": 8, "ranks": 3}, ""},
		{map[string]int64{"m": 2}, "-p m: the plan has no param m (declared params: ranks, n)"},
		{map[string]int64{"ranks": 0}, "-p ranks=0: the world size must be between 1 and 65536"},
		{map[string]int64{"ranks": elaborate.MaxRanks + 1, "z": 1}, "-p z: the plan has no param z (declared params: ranks, n); -p ranks=65537: the world size must be between 1 and 65536"},
	} {
		_, err := Load(t.Context(), "p.dag", src, tc.params, Options{})
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		var pe *elaborate.ParamError
		require.ErrorAs(t, err, &pe, "%v", tc.params)
		assert.Equal(t, tc.want, pe.Msg)
	}
	f, err := dsl.Parse("p.dag", []byte("plan p\n"))
	require.NoError(t, err)
	assert.EqualError(t, elaborate.CheckParams(f, map[string]int64{"ranks": 4}), "-p ranks: the plan has no param ranks (the plan declares no params)")
	_, err = elaborate.Elaborate(t.Context(), f, map[string]int64{"ranks": 4}, elaborate.Options{})
	assert.ErrorContains(t, err, "-p ranks: the plan has no param ranks (the plan declares no params)", "the same words as Elaborate's")
}
