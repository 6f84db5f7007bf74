//go:build amd64 && !purego

package exec

import "golang.org/x/sys/cpu"

// The f32 and f64 sums in AVX2 (sum_amd64.s) where the CPU and the OS have it. Go does not
// vectorise a loop, and these sums are most of the CPU a large allreduce spends outside the
// transfers. CPU time (task-clock) of BenchmarkReduceSumF32 against -tags purego (the scalar
// loop) on the project's 2-core Xeon, medians of 5 interleaved runs at load 13: 20,000 sums of
// 64 KiB 151 → 62 ms, 300 sums of 4 MiB 219 → 163 ms (harness included).
var haveAVX2 = cpu.X86.HasAVX2

// havePrefetchW says whether the CPU has PREFETCHW (CPUID 0x80000001, ECX bit 8), which the sums
// use to take their destination's cache lines back from a peer's core early (sum_amd64.s).
var havePrefetchW = func() bool {
	if top, _ := cpuid(0x80000000); top < 0x80000001 {
		return false
	}
	_, ecx := cpuid(0x80000001)
	return ecx&(1<<8) != 0
}()

//go:noescape
func sumF32AVX2(dst, src []float32, prefetch bool)

//go:noescape
func sumF64AVX2(dst, src []float64, prefetch bool)

func cpuid(leaf uint32) (eax, ecx uint32)

// sumF32 adds src into dst (as long), as sumInto does (bit for bit but for the payload of a
// sum of two NaNs).
func sumF32(dst, src []float32) { sumF32Prefetch(dst, src, havePrefetchW) }

// sumF64 adds src into dst (as long), as sumInto does (bit for bit but for the payload of a
// sum of two NaNs).
func sumF64(dst, src []float64) { sumF64Prefetch(dst, src, havePrefetchW) }

// sumF32Prefetch is sumF32, prefetching dst for writing or not.
func sumF32Prefetch(dst, src []float32, prefetch bool) {
	src = src[:len(dst)]
	if !haveAVX2 || len(dst) < 8 {
		sumInto(dst, src)
		return
	}
	sumF32AVX2(dst, src, prefetch)
	done := len(dst) &^ 7
	sumInto(dst[done:], src[done:])
}

// sumF64Prefetch is sumF64, prefetching dst for writing or not.
func sumF64Prefetch(dst, src []float64, prefetch bool) {
	src = src[:len(dst)]
	if !haveAVX2 || len(dst) < 4 {
		sumInto(dst, src)
		return
	}
	sumF64AVX2(dst, src, prefetch)
	done := len(dst) &^ 3
	sumInto(dst[done:], src[done:])
}
