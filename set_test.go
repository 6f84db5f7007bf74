package coredag

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeSet writes a plan set into a temporary directory; PLANS/ in text stands for this tree's
// plans directory.
func writeSet(t *testing.T, name, text string) string {
	t.Helper()
	plans, err := filepath.Abs("plans")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(text, "PLANS/", plans+"/")), 0o644))
	return path
}

func TestOpenSet(t *testing.T) {
	set := writeSet(t, "ar.set", "collective allreduce\n"+
		"plan PLANS/recursive_doubling_allreduce.dag sizes 0..4KiB ranks 4\n"+
		"plan PLANS/ring_allreduce.dag sizes 4KiB.. ranks 4 -p n=8\n")
	s, err := OpenSet(set)
	require.NoError(t, err)
	assert.Equal(t, "allreduce", s.Collective())
	file, params, why, err := s.Select(1<<20, 4)
	require.NoError(t, err)
	assert.Equal(t, "ring_allreduce.dag", filepath.Base(file))
	assert.Equal(t, map[string]int64{"n": 8}, params)
	assert.Contains(t, why, "ar.set:3:")
	p, err := s.Open(1<<20, 4, Options{Params: map[string]int64{"n": 64}})
	require.NoError(t, err)
	assert.Equal(t, "ring_allreduce", p.Name())
	assert.Equal(t, 4, p.Ranks())
	assert.Equal(t, int64(4*64*4), p.Buffers()[0].Bytes) // opts.Params win over the line's n
	_, err = s.Open(8, 5, Options{})
	assert.ErrorIs(t, err, ErrArg)
	_, err = s.Open(-1, 4, Options{})
	assert.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "a message of -1 bytes: sizes are 0 and up")
	file, _, _, err = s.Select(math.MaxInt64, 4) // the last line's range is open
	require.NoError(t, err)
	assert.Equal(t, "ring_allreduce.dag", filepath.Base(file))
	_, err = (&Set{}).Open(8, 4, Options{}) // not from OpenSet
	assert.ErrorIs(t, err, ErrInternal)
	_, _, _, err = (*Set)(nil).Select(8, 4)
	assert.ErrorIs(t, err, ErrInternal)

	bad := writeSet(t, "bad.set", "collective allreduce\nplan PLANS/ring_allreduce.dag sizes 1KiB.. ranks 4\n")
	_, err = OpenSet(bad)
	var ce *CheckError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Len(t, ce.Diagnostics(), 1)
	assert.Contains(t, ce.Error(), "bad.set:2:")
	assert.Contains(t, ce.Error(), "a gap: no plan serves sizes 0..1KiB at ranks 4")

	// a plan given as a set, and a set given as a plan
	_, err = OpenSet("plans/ring_allreduce.dag")
	assert.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "plans/ring_allreduce.dag is a plan, not a plan set: open it with Open")
	_, err = Open(set, Options{})
	assert.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "ar.set is a plan set, not a plan: open it with OpenSet")
	// by their first statement, whatever the name
	src, err := os.ReadFile(set)
	require.NoError(t, err)
	_, err = OpenSource("sets.txt", src, Options{})
	assert.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "sets.txt is a plan set, not a plan")
	src, err = os.ReadFile("plans/ring_allreduce.dag")
	require.NoError(t, err)
	plan := filepath.Join(t.TempDir(), "ring.txt")
	require.NoError(t, os.WriteFile(plan, src, 0o644))
	_, err = OpenSet(plan)
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Diagnostics(), 1)
	assert.Contains(t, ce.Error(), "ring.txt:19:1: this is a plan (`plan ring_allreduce`), not a plan set")

	// a set's plan files are read as Open reads one: at most 16 MiB
	_, err = OpenSet(writeSet(t, "zero.set", "collective allreduce\nplan /dev/zero sizes 0.. ranks 1..\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/dev/zero: larger than 16 MiB")
}

// Set.Open sets the size param from the message size when neither the line nor the caller does,
// whatever the plan's buffer makes of it: i64[n] in the recursive doubling, f32[ranks * n] in
// the ring.
func TestOpenSetSizeParam(t *testing.T) {
	s, err := OpenSet(writeSet(t, "ar.set", "collective allreduce\n"+
		"plan PLANS/recursive_doubling_allreduce.dag sizes 0..4KiB ranks 4\n"+
		"plan PLANS/ring_allreduce.dag sizes 4KiB.. ranks 4\n"))
	require.NoError(t, err)
	for _, tc := range []struct {
		size int64
		plan string
		n    int64
	}{
		{8, "recursive_doubling_allreduce", 1},
		{4088, "recursive_doubling_allreduce", 511},
		{4096, "ring_allreduce", 256},
		{1 << 20, "ring_allreduce", 1 << 16},
	} {
		p, err := s.Open(tc.size, 4, Options{})
		require.NoError(t, err, "size %d", tc.size)
		assert.Equal(t, tc.plan, p.Name())
		assert.Equal(t, tc.size, p.Buffers()[0].Bytes, "size %d", tc.size)
		v, ok := p.Graph().Param("n")
		assert.True(t, ok)
		assert.Equal(t, tc.n, v, "size %d", tc.size)
		require.NoError(t, p.Close())
	}
	// Not a multiple of what one n moves: the error says what to pad to.
	_, err = s.Open(4104, 4, Options{})
	assert.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "ring_allreduce.dag moves 16 B per unit of n with these params (ranks 4): a message of 4104 B is not a multiple of it; pad it to 4112 B; or set n in the params")
	_, err = s.Open(4, 4, Options{})
	assert.ErrorContains(t, err, "pad it to 8 B")
	_, err = s.Open(0, 4, Options{})
	assert.ErrorIs(t, err, ErrArg)
	assert.ErrorContains(t, err, "a message of 0 B holds no unit of it; pad it to 8 B")
	// The caller's n wins, as does a line's.
	p, err := s.Open(4104, 4, Options{Params: map[string]int64{"n": 2}})
	require.NoError(t, err)
	assert.Equal(t, int64(4*2*4), p.Buffers()[0].Bytes)
	require.NoError(t, p.Close())

	// A set that names another size param; a plan without it opens as it is.
	s, err = OpenSet(writeSet(t, "other.set", "collective allreduce\nsize-param count\nplan PLANS/ring_allreduce.dag sizes 0.. ranks 4\n"))
	require.NoError(t, err)
	p, err = s.Open(1<<20, 4, Options{})
	require.NoError(t, err)
	assert.Equal(t, int64(4*1024*4), p.Buffers()[0].Bytes) // the plan's own n = 1024
	require.NoError(t, p.Close())
}

// The plan sets of the MPI example and its bench load, and pick by size what their headers say,
// with n worked out for each plan's layout of data.
func TestExampleSets(t *testing.T) {
	type step struct {
		from int64 // the least size the plan runs
		plan string
	}
	for _, tc := range []struct {
		set   string
		ranks int
		steps []step // after the recursive doubling, from 0
	}{
		{"examples/mpi/shm.set", 2, []step{{4 << 20, "rabenseifner_f32"}}},
		{"examples/mpi/shm.set", 4, []step{{128 << 10, "rabenseifner_f32"}}},
		{"examples/mpi/tcp.set", 2, []step{{2 << 20, "rabenseifner_f32"}}},
		{"examples/mpi/tcp.set", 4, []step{{128 << 10, "rabenseifner_f32"}}},
		{"examples/mpi/sockets.set", 2, []step{{2 << 20, "rabenseifner_f32"}}},
		{"examples/mpi/sockets.set", 4, []step{{192 << 10, "rabenseifner_merged_f32"}, {2 << 20, "rabenseifner_f32"}}},
		{"examples/mpi/sockets.set", 8, []step{{192 << 10, "rabenseifner_merged_f32"}, {2 << 20, "rabenseifner_f32"}}},
	} {
		s, err := OpenSet(tc.set)
		require.NoError(t, err, tc.set)
		sizes := []int64{16, 16 << 20}
		for _, st := range tc.steps {
			sizes = append(sizes, st.from-64, st.from) // 64 B: a whole number of every plan's units
		}
		for _, size := range sizes {
			p, err := s.Open(size, tc.ranks, Options{})
			require.NoError(t, err, "%s at %d B, %d ranks", tc.set, size, tc.ranks)
			want := "recursive_doubling_f32"
			for _, st := range tc.steps {
				if size >= st.from {
					want = st.plan
				}
			}
			assert.Equal(t, want, p.Name(), "%s at %d B, %d ranks", tc.set, size, tc.ranks)
			assert.Equal(t, size, p.Buffers()[0].Bytes, "%s at %d B, %d ranks", tc.set, size, tc.ranks)
			require.NoError(t, p.Close())
		}
	}
	// 3 ranks fall to the lines for small worlds, whose plans need a power of two.
	s, err := OpenSet("examples/mpi/shm.set")
	require.NoError(t, err)
	_, err = s.Open(4096, 3, Options{})
	assert.ErrorContains(t, err, "ranks must be a power of two")
}
