package coredag

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenSet(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	set := filepath.Join(dir, "ar.set")
	require.NoError(t, os.WriteFile(set, []byte("collective allreduce\n"+
		"plan "+filepath.Join(root, "plans/recursive_doubling_allreduce.dag")+" sizes 0..4KiB ranks 4\n"+
		"plan "+filepath.Join(root, "plans/ring_allreduce.dag")+" sizes 4KiB.. ranks 4 -p n=8\n"), 0o644))
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

	bad := filepath.Join(dir, "bad.set")
	require.NoError(t, os.WriteFile(bad, []byte("collective allreduce\n"+
		"plan "+filepath.Join(root, "plans/ring_allreduce.dag")+" sizes 1KiB.. ranks 4\n"), 0o644))
	_, err = OpenSet(bad)
	var ce *CheckError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Len(t, ce.Diagnostics(), 1)
	assert.Contains(t, ce.Error(), "bad.set:2:")
	assert.Contains(t, ce.Error(), "a gap: no plan serves sizes 0..1KiB at ranks 4")
}
