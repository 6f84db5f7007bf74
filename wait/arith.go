package wait

import "fmt"

// Space is a cyclic index space of 2^Bits values.
type Space uint8

// The index spaces of the hardware.
const (
	CQ Space = 24 // CQ producer index (CQE_WAIT counts)
	WQ Space = 16 // work queue producer index (SEND_EN / RECV_EN indices)
)

// Bits is the width of the index.
func (s Space) Bits() uint { return uint(s) }

// Mask is 2^Bits - 1.
func (s Space) Mask() uint32 { return uint32(1)<<s - 1 }

// Half is 2^(Bits-1): the largest distance two indices may be apart and still compare correctly.
func (s Space) Half() uint32 { return uint32(1) << (s - 1) }

// Wrap reduces v into the space.
func (s Space) Wrap(v uint64) uint32 { return uint32(v) & s.Mask() }

// Add returns a + n modulo 2^Bits.
func (s Space) Add(a uint32, n uint64) uint32 { return s.Wrap(uint64(a) + n) }

// Diff returns the signed cyclic distance a - b, in [-Half, Half).
func (s Space) Diff(a, b uint32) int32 {
	d := (a - b) & s.Mask()
	if d >= s.Half() {
		return int32(d) - int32(s.Mask()) - 1
	}
	return int32(d)
}

// Reached reports whether count has reached target, comparing cyclically: count - target
// (mod 2^Bits) is below Half.
func (s Space) Reached(count, target uint32) bool { return (count-target)&s.Mask() < s.Half() }

// At returns the index iteration iter of a persistent plan uses: base + iter*perIteration,
// wrapping. base is the iteration-0 index the planner computed.
func (s Space) At(base, perIteration uint32, iter uint64) uint32 {
	// (iter*per) mod 2^Bits without overflow: reduce iter first (2^Bits divides 2^64).
	return s.Wrap(uint64(base) + (iter&uint64(s.Mask()))*uint64(perIteration))
}

// Check reports an error when a chain producing perIteration entries per iteration cannot be
// compared unambiguously in this space.
func (s Space) Check(perIteration uint64) error {
	if perIteration >= uint64(s.Half()) {
		return fmt.Errorf("%d entries per iteration exceed the %d-bit index space (at most %d compare unambiguously)", perIteration, s.Bits(), s.Half()-1)
	}
	return nil
}

func (s Space) String() string { return fmt.Sprintf("%d-bit", s.Bits()) }
