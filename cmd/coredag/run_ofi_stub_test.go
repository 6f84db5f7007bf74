//go:build !(ofi && linux)

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRunOFINotBuilt: without the ofi build tag, --provider ofi is a usage error that says how
// to build coredag with libfabric.
func TestRunOFINotBuilt(t *testing.T) {
	t.Parallel()
	code, _, stderr := coredag(t, "", "run", "--provider", "ofi", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "go build -tags ofi")
}
