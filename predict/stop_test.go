package predict

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimulateStops: a simulation whose context is cancelled stops within simPoll events with
// the context's cause; a live context changes nothing. The ring at 64 ranks handles several
// times simPoll events.
func TestSimulateStops(t *testing.T) {
	t.Parallel()
	p := compileFile(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": 64, "n": 16}, "connectx")
	want, err := Simulate(p, Default(), Options{})
	require.NoError(t, err)
	require.Greater(t, want.Events, 2*simPoll)
	got, err := Simulate(p, Default(), Options{Context: context.Background()})
	require.NoError(t, err)
	assert.Equal(t, want, got)

	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("interrupted")
	cancel(cause)
	_, err = Simulate(p, Default(), Options{Context: ctx})
	assert.Same(t, cause, err)
}
