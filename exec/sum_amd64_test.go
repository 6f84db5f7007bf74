//go:build amd64 && !purego

package exec

import "testing"

// TestSumPrefetchEitherWay: the AVX2 sums give the scalar loop's results whether or not they
// prefetch their destination, whatever this CPU reports (havePrefetchW).
func TestSumPrefetchEitherWay(t *testing.T) {
	t.Logf("AVX2: %v, PREFETCHW: %v", haveAVX2, havePrefetchW)
	for _, pw := range []bool{false, true} {
		checkSumsBitForBit(t,
			func(dst, src []float32) { sumF32Prefetch(dst, src, pw) },
			func(dst, src []float64) { sumF64Prefetch(dst, src, pw) })
	}
}
