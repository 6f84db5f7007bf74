package predict

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/stoptest"
)

// TestSimulateStops: a simulation looks at its context as it starts and every simPoll events,
// and cancelled at any of those looks it stops with the context's cause; a live context changes
// nothing. The ring at 64 ranks handles several times simPoll events. A fit, which simulates its
// samples again and again, stops too.
func TestSimulateStops(t *testing.T) {
	t.Parallel()
	p := compileFile(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": 64, "n": 16}, "connectx")
	want, err := Simulate(context.Background(), p, Default(), Options{})
	require.NoError(t, err)
	require.Greater(t, want.Events, 2*simPoll)
	all := stoptest.CancelAt(0)
	got, err := Simulate(all, p, Default(), Options{})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	n := all.Count()
	require.Equal(t, int64(1+want.Events/simPoll), n, "a look as it starts, then one every simPoll events")
	for _, at := range []int64{1, 2, n} {
		_, err := Simulate(stoptest.CancelAt(at), p, Default(), Options{})
		assert.Equal(t, context.Canceled, err, "cancelled at look %d of %d", at, n)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")
	cancel(cause)
	_, err = Simulate(ctx, p, Default(), Options{})
	assert.Same(t, cause, err)
	samples := []Sample{{Name: "ring", Plan: p, Scale: 1, Measured: want.Time}}
	_, _, err = FitCache(ctx, samples, Params{Workers: 1}, FitFigures)
	assert.Same(t, cause, err, "the fit stops, and says why as it is")
}
