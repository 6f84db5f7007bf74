package ir

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Iterations: iteration i needs first + i*amount <= max, where first is the larger of the
// counter's per-iteration amount and its highest threshold or set value.
func TestCounterIterations(t *testing.T) {
	tr := &Triggered{
		Counters: []Counter{
			{Name: "a", PerIteration: 3},
			{Name: "b", PerIteration: 0},
			{Name: "c", PerIteration: 2},
			{Name: "d", PerIteration: 1},
		},
		Work: []TriggeredOp{
			{Kind: TrigOp, Counter: 0, Threshold: 3},
			{Kind: TrigAdd, Counter: 0, Threshold: 1, Target: 2, Value: 1},
			{Kind: TrigOp, Counter: 2, Threshold: 5}, // above its amount: first is 5
			{Kind: TrigSet, Counter: Untriggered, Target: 3, Value: 4},
		},
	}
	for _, c := range []struct {
		cnt  int
		max  uint64
		want uint64
	}{
		{0, 2, 0},                // 3 > 2: not even iteration 0
		{0, 3, 1},                // 3
		{0, 5, 1},                // 3, then 6 > 5
		{0, 6, 2},                // 3, 6
		{0, 10, 3},               // 3, 6, 9
		{1, 0, NoIterationLimit}, // never grows
		{2, 5, 1},                // threshold 5, then 7
		{2, 9, 3},                // 5, 7, 9
		{3, 3, 0},                // set to 4
		{3, 7, 4},                // 4, 5, 6, 7
		{0, math.MaxUint64, (math.MaxUint64-3)/3 + 1},
	} {
		assert.Equal(t, c.want, tr.Iterations(c.cnt, c.max), "counter %s, max %d", tr.Counters[c.cnt].Name, c.max)
	}
	// Against a step-by-step count for small limits: run iterations while every value the
	// counter must reach (thresholds and set values moved by i*amount, and (i+1)*amount) fits.
	for cnt := range tr.Counters {
		amount := tr.Counters[cnt].PerIteration
		for lim := uint64(0); lim < 40; lim++ {
			n := uint64(0)
			for ; n < 100; n++ {
				fits := (n+1)*amount <= lim
				for _, w := range tr.Work {
					if w.Counter == cnt && w.Threshold+n*amount > lim || w.Kind == TrigSet && w.Target == cnt && w.Value+n*amount > lim {
						fits = false
					}
				}
				if !fits {
					break
				}
			}
			got := tr.Iterations(cnt, lim)
			assert.Equal(t, got, tr.AllIterations(lim)[cnt], "AllIterations: counter %s, max %d", tr.Counters[cnt].Name, lim)
			if n == 100 {
				assert.Equal(t, uint64(NoIterationLimit), got, "counter %s, max %d", tr.Counters[cnt].Name, lim)
				continue
			}
			assert.Equal(t, n, got, "counter %s, max %d", tr.Counters[cnt].Name, lim)
		}
	}
}
