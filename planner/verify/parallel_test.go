package verify

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// forParts makes exactly the parts it is given, whatever GOMAXPROCS is now (a pass that counts
// in one round and places in the next relies on it), and they tile [0, n) in order.
func TestForPartsExact(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, c := range []struct{ parts, n int }{{1, 0}, {1, 5}, {3, 3}, {4, 10}, {7, 100}} {
		var mu sync.Mutex
		got := make([][2]int, c.parts)
		seen := 0
		forParts(c.parts, c.n, func(p, lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			got[p] = [2]int{lo, hi}
			seen++
		})
		assert.Equal(t, c.parts, seen, "%+v", c)
		end := 0
		for p, r := range got {
			assert.Equal(t, end, r[0], "%+v part %d", c, p)
			assert.LessOrEqual(t, r[0], r[1])
			end = r[1]
		}
		assert.Equal(t, c.n, end, "%+v", c)
	}
}
