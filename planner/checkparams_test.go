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
		{map[string]int64{"m": 2}, "m = 2: the plan has no param m (declared params: ranks, n)"},
		{map[string]int64{"ranks": 0}, "ranks = 0: the world size must be between 1 and 65536"},
		{map[string]int64{"ranks": elaborate.MaxRanks + 1, "z": 1}, "z = 1: the plan has no param z (declared params: ranks, n); ranks = 65537: the world size must be between 1 and 65536"},
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
	assert.EqualError(t, elaborate.CheckParams(f, map[string]int64{"ranks": 4}), "ranks = 4: the plan has no param ranks (the plan declares no params)")
	_, err = elaborate.Elaborate(t.Context(), f, map[string]int64{"ranks": 4}, elaborate.Options{})
	assert.ErrorContains(t, err, "ranks = 4: the plan has no param ranks (the plan declares no params)", "the same words as Elaborate's")
}

// TestMSCCLRanks: an MSCCL algorithm's world size is its ngpus; setting ranks is the caller's
// mistake, worded for any caller (coredag's -p, the library's params).
func TestMSCCLRanks(t *testing.T) {
	_, err := Load(t.Context(), "a.xml", []byte("<algo/>"), map[string]int64{"ranks": 4}, Options{})
	var pe *elaborate.ParamError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "ranks: an MSCCL algorithm runs on the ngpus GPUs its XML lists, and sets no other world size; of the params only chunk (elements per chunk) applies", pe.Msg)
}
