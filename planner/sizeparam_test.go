package planner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/planner/elaborate"
)

func TestSizeParam(t *testing.T) {
	plan := func(count string) []byte {
		return []byte("plan p\nparam ranks = 2\nparam n = 4\nparam k = 2\n" +
			"buffer data f32[" + count + "] extern init rank\nbuffer tmp f32[n]\n" +
			"queue q to rank ^ 1\nop tx = send q data[0:n]\nop rx = recv q tmp\n" +
			"op red = reduce sum data[0:n] from tmp after rx, tx\n")
	}
	ps := map[string]int64{"ranks": 2, "k": 3}
	n, ok, err := SizeParam(t.Context(), "p.dag", plan("k * n"), "n", 96, ps, elaborate.Options{})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, int64(8), n) // 96 B = 3 * 8 f32
	_, _, err = SizeParam(t.Context(), "p.dag", plan("k * n"), "n", 100, ps, elaborate.Options{})
	assert.EqualError(t, err, "p.dag moves 12 B per unit of n with these params (ranks 2): a message of 100 B is not a multiple of it; pad it to 108 B")
	_, _, err = SizeParam(t.Context(), "p.dag", plan("k * n"), "n", math.MaxInt64, ps, elaborate.Options{}) // the next multiple overflows
	assert.ErrorContains(t, err, "is not a multiple of it; no multiple of it that large is a size")
	_, _, err = SizeParam(t.Context(), "p.dag", plan("k * n"), "n", 0, ps, elaborate.Options{})
	assert.EqualError(t, err, "p.dag moves 12 B per unit of n with these params (ranks 2): a message of 0 B holds no unit of it; pad it to 12 B")
	_, _, err = SizeParam(t.Context(), "p.dag", plan("k * n"), "n", 4, ps, elaborate.Options{})
	assert.ErrorContains(t, err, "a message of 4 B is not a multiple of it; pad it to 12 B")
	_, _, err = SizeParam(t.Context(), "p.dag", plan("n + 4"), "n", 100, ps, elaborate.Options{})
	assert.EqualError(t, err, "p.dag: its message (20 B at n = 1, 24 B at n = 2) does not grow in proportion to n")
	_, ok, err = SizeParam(t.Context(), "p.dag", plan("k * n"), "count", 96, ps, elaborate.Options{})
	require.NoError(t, err)
	assert.False(t, ok) // no such param: the plan opens as it is
	_, _, err = SizeParam(t.Context(), "p.dag", []byte("plan p\nparam n = 1\nassert n < 0, \"n too small\"\nbuffer data f32[n] extern\n"), "n", 64, nil, elaborate.Options{})
	assert.ErrorContains(t, err, "p.dag: working out n for a message of 64 B, at n = 1: ")
	assert.ErrorContains(t, err, "n too small")
}

// A plan that asserts its size param is a multiple of something is probed where it holds.
func TestSizeParamAsserted(t *testing.T) {
	src := []byte("plan p\nparam n = 64\nassert n % 8 == 0, \"n: a multiple of 8\"\nbuffer data f32[n] extern\n")
	n, ok, err := SizeParam(t.Context(), "p.dag", src, "n", 1<<20, nil, elaborate.Options{})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, int64(1<<18), n)
}

// The last multiples below 2^63-1 are sizes: the quotient, and the padding up to one, do not
// overflow.
func TestSizeParamNearMaxInt(t *testing.T) {
	src := []byte("plan p\nparam n = 4\nbuffer data f32[3 * n] extern\n") // 12 B per n
	last := int64(math.MaxInt64) / 12 * 12
	n, ok, err := SizeParam(t.Context(), "p.dag", src, "n", last, nil, elaborate.Options{})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, last/12, n)
	_, _, err = SizeParam(t.Context(), "p.dag", src, "n", last-1, nil, elaborate.Options{})
	assert.ErrorContains(t, err, fmt.Sprintf("a message of %d B is not a multiple of it; pad it to %d B", last-1, last))
	_, _, err = SizeParam(t.Context(), "p.dag", src, "n", last+1, nil, elaborate.Options{})
	assert.ErrorContains(t, err, "no multiple of it that large is a size")
}

// A cancelled context stops SizeParam with its cause, not a note on the plan's size.
func TestSizeParamStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")
	cancel(cause)
	src := []byte("plan p\nparam n = 4\nbuffer data f32[3 * n] extern\n")
	_, _, err := SizeParam(ctx, "p.dag", src, "n", 96, nil, elaborate.Options{})
	assert.Same(t, cause, err)
}

// A set's line naming another set, by its name or by its first statement, gets one error that
// says so, not the plan language's error on the set's first line.
func TestSetPlanExpectsRefusesSets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	set := []byte("collective allreduce\nplan ring.dag sizes 0.. ranks 2\n")
	check := SetPlanExpects(Options{})
	for _, name := range []string{"inner.set", "inner.txt"} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, set, 0o644))
		_, err := check(t.Context(), path, 2, nil)
		assert.EqualError(t, err, path+" is a plan set, not a plan: a set's lines name plan files, and sets do not nest")
	}
}
