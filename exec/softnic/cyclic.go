package softnic

// Cross-channel indices are short and wrap: a CQ's producer index is 24 bits wide, a work queue's
// WQE index 16 bits. Conditions compare them cyclically, so a persistent plan re-armed forever keeps
// working as long as no condition is more than half the ring ahead of the counter.

const (
	cqIndexBits = 24
	cqIndexMask = 1<<cqIndexBits - 1
	wqIndexBits = 16
)

// cqReached reports whether a CQ that has produced `produced` completions (cumulative, any width)
// satisfies CQE_WAIT for `count`: produced >= count, modulo 2^24.
func cqReached(produced uint64, count uint32) bool {
	d := (uint32(produced) - count) & cqIndexMask
	return d < 1<<(cqIndexBits-1)
}

// wqEnabled reports whether the WQE with cumulative index idx may run under an ENABLE up to
// `upto` (exclusive): idx < upto, modulo 2^16.
func wqEnabled(idx uint64, upto uint16) bool {
	return int16(upto-uint16(idx)) > 0
}
