package softnic

import "github.com/coredag/coredag/wait"

// Cross-channel indices are short and wrap: a CQ's producer index is 24 bits wide, a work queue's
// WQE index 16 bits. The comparisons are the wait package's, shared with the planner, so the
// software NIC and the compiler agree on what a count means across the wrap.

const cqIndexMask = 1<<24 - 1 // wait.CQ.Mask(), as a constant for the stall report

// cqReached reports whether a CQ that has produced `produced` completions (cumulative, any width)
// satisfies CQE_WAIT for `count`: produced >= count, modulo 2^24.
func cqReached(produced uint64, count uint32) bool {
	return wait.CQ.Reached(uint32(produced), count)
}

// wqEnabled reports whether the WQE with cumulative index idx may run under an ENABLE up to
// `upto` (exclusive): idx < upto, modulo 2^16.
func wqEnabled(idx uint64, upto uint16) bool {
	return !wait.WQ.Reached(uint32(idx), uint32(upto))
}
