package ir_test

import (
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// wordRing: every rank adds 2^60 to word w[2] of its right neighbour, which starts at rank *
// 2^61 + 2, and waits on its own twice. Rank 2's word starts highest: 11 iterations fit
// (2^62 + 2 + 11 * 2^60 < 2^64 <= 2^62 + 2 + 12 * 2^60); rank 1's fit 13, rank 0's 15.
const wordRing = `plan word_ring
param ranks = 3
buffer w u64[4] remote_atomic init (rank << 61) + i
queue right to (rank + 1) % ranks peer left
queue left to (rank + ranks - 1) % ranks peer right
op bump = atomic add right w[2] 1 << 60
op got = wait w[2] >= (rank << 61) + 2 + (1 << 60)
op early = wait w[2] >= 1
`

// WordLimit finds the watched word that wraps first when no iteration resets the memory: it
// reads the word's start from its buffer's init on its rank, sums the adds into it, and names
// the first wait that watches it; its Check refuses one iteration more, saying so.
func TestWordLimit(t *testing.T) {
	t.Parallel()
	g, err := planner.Load(t.Context(), "word_ring.dag", []byte(wordRing), nil, planner.Options{})
	require.NoError(t, err, "the plan passes check")
	lim := g.WordLimit()
	assert.Equal(t, 2, lim.Rank)
	assert.Equal(t, "got", g.Ops[lim.Wait].Name)
	assert.Equal(t, ir.Slice{Buf: 0, Off: 2, Len: 1}, lim.Word)
	assert.Equal(t, uint64(1<<62+2), lim.Start)
	assert.Equal(t, uint64(1<<60), lim.PerIteration)
	assert.Equal(t, uint64(11), lim.Iterations)
	require.NoError(t, lim.Check(g, 11))
	err = lim.Check(g, 12)
	require.ErrorIs(t, err, ir.ErrIterationLimit)
	assert.Equal(t, "12 iterations would wrap w[2] on rank 2, the word that wait got watches: it starts at 4611686018427387906, the atomic adds into it raise it by 1152921504606846976 per iteration and nothing resets it between iterations, so iteration 12 (counting from 1) would take it past 18446744073709551615, the largest u64, and the wait would hang or complete too early: at most 11 iterations fit (start the word lower, or add less)", err.Error())

	// An i64 word is compared signed: from 2^62, adds of 2^61 fit once below 2^63.
	signed, err := os.ReadFile("../testdata/onesided/word_wrap.dag")
	require.NoError(t, err)
	g, err = planner.Load(t.Context(), "word_wrap.dag", signed, nil, planner.Options{})
	require.NoError(t, err)
	lim = g.WordLimit()
	assert.Equal(t, uint64(1), lim.Iterations)
	assert.ErrorContains(t, lim.Check(g, 2), "only the first iteration fits")
	// From the smallest i64, -2^63, adds of 2^62 fit three times: the fourth would take it to 2^63.
	g, err = planner.Load(t.Context(), "neg.dag", []byte(`plan neg
param ranks = 2
buffer word i64[1] remote_atomic init -9223372036854775807 - 1
queue q to 1 - rank peer q
if rank == 1 {
  op bump = atomic add q word[0] 4611686018427387904
}
if rank == 0 {
  op got = wait word[0] >= -9223372036854775807
}
`), nil, planner.Options{})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), g.WordLimit().Iterations)
}

// A plan with no watched word, or whose watched word no add raises, runs any number of
// iterations.
func TestWordLimitNone(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`plan none
param ranks = 2
buffer a u64[4]
buffer b u64[4]
queue q to 1 - rank peer q
op tx = send q a
op rx = recv q b
`, `plan still
param ranks = 2
buffer word u64[1] remote_atomic init 3
op got = wait word[0] >= 2
`} {
		g, err := planner.Load(t.Context(), "none.dag", []byte(src), nil, planner.Options{})
		require.NoError(t, err)
		lim := g.WordLimit()
		assert.Equal(t, -1, lim.Rank)
		assert.Equal(t, uint64(ir.NoIterationLimit), lim.Iterations)
		require.NoError(t, lim.Check(g, math.MaxUint64))
	}
}
