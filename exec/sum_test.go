package exec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sumBits are f32 values whose sums round, overflow, cancel and meet NaNs of different payloads,
// infinities of both signs and zeros of both signs.
func sumBits32(r *rand.Rand) float32 {
	switch r.IntN(8) {
	case 0:
		return math.Float32frombits(0x7fc00000 | r.Uint32()&0x3fffff) // quiet NaN, some payload
	case 1:
		return math.Float32frombits(0xff800001 + r.Uint32()&0x3fffff) // signalling NaN, negative
	case 2:
		return float32(math.Inf(1 - 2*r.IntN(2)))
	case 3:
		return float32(math.Copysign(0, float64(1-2*r.IntN(2))))
	case 4:
		return math.MaxFloat32 * (1 - 2*r.Float32())
	default:
		return math.Float32frombits(r.Uint32())
	}
}

func sumBits64(r *rand.Rand) float64 {
	switch r.IntN(8) {
	case 0:
		return math.Float64frombits(0x7ff8000000000000 | r.Uint64()&0x7ffffffffffff)
	case 1:
		return math.Float64frombits(0xfff0000000000001 + r.Uint64()&0x7ffffffffffff)
	case 2:
		return math.Inf(1 - 2*r.IntN(2))
	case 3:
		return math.Copysign(0, float64(1-2*r.IntN(2)))
	case 4:
		return math.MaxFloat64 * (1 - 2*r.Float64())
	default:
		return math.Float64frombits(r.Uint64())
	}
}

// TestSumFloatsBitForBit: the vector sums (AVX2 where the CPU has it) give the scalar loop's
// results bit for bit at every length around their steps and from every element offset (so
// vectors start unaligned). A sum of two NaNs is a NaN either way, but which operand's payload
// it carries is not compared: Go leaves it unspecified, and the compiler orders the operands of
// the scalar loop's addition differently with -race than without.
func TestSumFloatsBitForBit(t *testing.T) {
	t.Logf("AVX2: %v", haveAVX2)
	checkSumsBitForBit(t, sumF32, sumF64)
}

// checkSumsBitForBit compares sum32 and sum64 with the scalar loop on every length up to 140
// at every offset up to 8, on random values with NaNs, infinities and signed zeros among them.
func checkSumsBitForBit(t *testing.T, sum32 func(dst, src []float32), sum64 func(dst, src []float64)) {
	r := rand.New(rand.NewPCG(29, 31))
	for n := 0; n <= 140; n++ {
		for off := 0; off < 8; off++ {
			d32, s32 := make([]float32, off+n), make([]float32, off+n)
			d64, s64 := make([]float64, off+n), make([]float64, off+n)
			for i := range d32 {
				d32[i], s32[i] = sumBits32(r), sumBits32(r)
				d64[i], s64[i] = sumBits64(r), sumBits64(r)
			}
			w32, w64 := append([]float32(nil), d32...), append([]float64(nil), d64...)
			sumInto(w32[off:], s32[off:])
			sumInto(w64[off:], s64[off:])
			sum32(d32[off:], s32[off:])
			sum64(d64[off:], s64[off:])
			for i := range d32 {
				if math.Float32bits(d32[i]) != math.Float32bits(w32[i]) && !bothNaN(float64(d32[i]), float64(w32[i])) {
					t.Fatalf("f32, %d elements from %d: element %d is %#x, the scalar sum %#x", n, off, i, math.Float32bits(d32[i]), math.Float32bits(w32[i]))
				}
				if math.Float64bits(d64[i]) != math.Float64bits(w64[i]) && !bothNaN(d64[i], w64[i]) {
					t.Fatalf("f64, %d elements from %d: element %d is %#x, the scalar sum %#x", n, off, i, math.Float64bits(d64[i]), math.Float64bits(w64[i]))
				}
			}
		}
	}
}

func bothNaN(x, y float64) bool { return math.IsNaN(x) && math.IsNaN(y) }
