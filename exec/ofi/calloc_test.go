//go:build ofi && linux && !asan

package ofi

import (
	"math"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCallocFails: an allocation C refuses is an error that says what and why, not a NULL for
// the caller to crash on. Not under go test -asan, whose calloc aborts the program on such a
// request by default.
func TestCallocFails(t *testing.T) {
	p, err := calloc(math.MaxInt, 16, "rank 0: test array")
	assert.Nil(t, p)
	require.ErrorIs(t, err, syscall.ENOMEM)
	assert.Regexp(t, `^ofi: rank 0: test array: calloc\(\d+, 16\): cannot allocate memory$`, err.Error())
}
