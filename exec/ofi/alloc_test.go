//go:build ofi && linux && !asan

package ofi

import (
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// TestAllocFails: a region posix_memalign refuses is an error that names the rank, the size
// and the reason (it was "ofi: cannot allocate N bytes"), and wraps the errno. Not under go
// test -asan, whose allocator aborts the program on such a request by default.
func TestAllocFails(t *testing.T) {
	c, err := provider(t).OpenContext(0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	pd, err := c.PD()
	require.NoError(t, err)
	m, err := pd.Alloc(math.MaxInt, nic.AccessLocalWrite)
	assert.Nil(t, m)
	require.ErrorIs(t, err, syscall.ENOMEM)
	assert.Regexp(t, `^ofi: rank 0: region \(\d+ bytes\): posix_memalign: cannot allocate memory$`, err.Error())
}

// TestEndpointScratchFails: when the scratch region of an endpoint's atomics cannot be
// allocated, the error says that it was for it, and for which endpoint.
func TestEndpointScratchFails(t *testing.T) {
	p := provider(t)
	if !p.Caps().Atomics {
		t.Skip("no atomics: endpoints have no scratch region")
	}
	a, _ := pair(t, p, nictest.AllAccess, 8, nil)
	had := a.qp.scratch
	err := a.qp.allocScratch(a.pd, math.MaxInt/32)
	require.ErrorIs(t, err, syscall.ENOMEM)
	assert.Regexp(t, `^ofi: rank 0: qp \d+: the scratch region of its atomics \(\d+ bytes\): posix_memalign: cannot allocate memory$`, err.Error())
	assert.Same(t, had, a.qp.scratch, "a failed allocation leaves the endpoint's region")
}
