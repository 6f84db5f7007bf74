package stoptest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/internal/stop"
)

func TestCancelAt(t *testing.T) {
	t.Parallel()
	c := CancelAt(3)
	assert.NoError(t, stop.Cause(c))
	assert.NoError(t, stop.Cause(c))
	assert.Equal(t, context.Canceled, stop.Cause(c), "the third look")
	assert.Equal(t, context.Canceled, c.Err(), "and after")
	never := CancelAt(0)
	for range 100 {
		assert.NoError(t, never.Err())
	}
	assert.Equal(t, int64(100), never.Count())
}
