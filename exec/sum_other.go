//go:build !amd64 || purego

package exec

// haveAVX2 is false off amd64 (and with -tags purego): the sums are sumInto's.
const haveAVX2 = false

func sumF32(dst, src []float32) { sumInto(dst, src) }

func sumF64(dst, src []float64) { sumInto(dst, src) }
