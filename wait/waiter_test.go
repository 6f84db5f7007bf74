package wait

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCounterWaitWakes(t *testing.T) {
	var c Counter
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = c.WaitTimeout(10*time.Second, uint32(i+1))
		}(i)
	}
	for i := 0; i < 4; i++ {
		c.Add(1)
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, uint32(4), c.Load())
}

func TestCounterWaitIsBounded(t *testing.T) {
	var c Counter
	c.Add(2)
	err := c.WaitTimeout(20*time.Millisecond, 3)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrStuck))
	assert.Contains(t, err.Error(), "count 2, awaited 3")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.Error(t, c.Wait(ctx, 3))
	assert.NoError(t, c.Wait(ctx, 2), "a condition that holds returns even on a dead context")
}

func TestCounterWraps(t *testing.T) {
	var c Counter
	c.Add(1<<24 - 1)
	c.Add(3)
	assert.Equal(t, uint32(2), c.Load())
	assert.Equal(t, uint64(1<<24+2), c.Total())
	assert.True(t, c.Reached(1<<24-1))
	assert.True(t, c.Reached(2))
	assert.False(t, c.Reached(3))
}

func TestSpin(t *testing.T) {
	n := 0
	assert.True(t, Spin(func() bool { n++; return n == 100 }, 1000))
	assert.False(t, Spin(func() bool { return false }, 10))
}

func BenchmarkCounterAddLoad(b *testing.B) {
	var c Counter
	for i := 0; i < b.N; i++ {
		c.Add(1)
		_ = c.Reached(uint32(i))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/completion")
}
