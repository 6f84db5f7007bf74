package stop

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	assert.NoError(t, Cause(ctx))
	assert.NoError(t, Stopped(ctx, errors.New("failed")), "a failure of work that goes on is its own")
	cause := errors.New("interrupted")
	cancel(cause)
	assert.Same(t, cause, Cause(ctx))
	assert.NoError(t, Stopped(ctx, nil), "work that finished stopped nothing")
	assert.Same(t, cause, Stopped(ctx, errors.New("context canceled")))
}

// TestPoll: a Poll looks at the context once every n units of work, and stays stopped once it
// has found it cancelled.
func TestPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	p := Every(ctx, 4)
	for range 10 {
		assert.NoError(t, p.Step())
	}
	cause := errors.New("interrupted")
	cancel(cause)
	// 10 steps: the looks were at 4 and 8; the next is at 12.
	assert.NoError(t, p.Step(), "step 11 does not look")
	assert.Same(t, cause, p.Step())
	assert.Same(t, cause, p.Step(), "stopped for good")

	p = Every(ctx, 1<<10)
	assert.NoError(t, p.Add(1<<10-1))
	assert.Same(t, cause, p.Add(5), "work past the next look looks")

	var zero Poll
	assert.NoError(t, zero.Add(1<<20), "the zero Poll looks at nothing")
}
