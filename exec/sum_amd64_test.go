//go:build amd64 && !purego

package exec

import "testing"

// TestSumPrefetchEitherWay: the AVX2 sums give the scalar loop's results whether or not they
// prefetch their destination (havePrefetchW), whatever this CPU has.
func TestSumPrefetchEitherWay(t *testing.T) {
	t.Logf("AVX2: %v, PREFETCHW: %v", haveAVX2, havePrefetchW)
	saved := havePrefetchW
	defer func() { havePrefetchW = saved }()
	for _, pw := range []bool{false, true} {
		havePrefetchW = pw
		checkSumsBitForBit(t)
	}
}
