package wait

// Cond is a completion condition: the rank-local CQ numbered CQ has produced at least Count
// completions (cumulative over the CQ's life, compared cyclically in the 24-bit space). Count is
// for iteration 0; At re-arms it.
type Cond struct {
	CQ    int32  // index of the CQ among its rank's
	Count uint32 // producer index to reach, iteration 0
}

// At is the count c awaits in iteration iter of a plan whose CQ produces per completions an
// iteration: Count + iter*per, wrapped to 24 bits. It is what a re-armed CQE_WAIT carries.
func (c Cond) At(per uint32, iter uint64) uint32 { return CQ.At(c.Count, per, iter) }

// Target is the count c awaits in iteration iter, unwrapped: the value a 64-bit count of every
// completion since the start reaches (what diagnostics report).
func (c Cond) Target(per uint32, iter uint64) uint64 { return uint64(c.Count) + iter*uint64(per) }

// SatisfiedBy reports whether a CQ that has produced `produced` completions (cumulative, any
// width) satisfies c in iteration iter, its CQ producing per completions an iteration.
func (c Cond) SatisfiedBy(produced uint64, per uint32, iter uint64) bool {
	return Satisfied(produced, c.At(per, iter))
}

// Satisfied reports whether a CQ that has produced `produced` completions (cumulative, any width)
// satisfies a CQE_WAIT for count, the re-armed producer index the WAIT carries: produced >= count,
// modulo 2^24. This is the NIC's test.
func Satisfied(produced uint64, count uint32) bool { return CQ.Reached(uint32(produced), count) }

// Enable lets a managed work queue run: the rank-local work queue numbered Queue may run its WQEs
// of producer index [0, UpTo) (iteration 0; At re-arms it).
type Enable struct {
	Queue int32  // index of the work queue among its rank's
	UpTo  uint32 // enabled producer index (exclusive), iteration 0
}

// At is the index e enables up to in iteration iter of a plan whose queue posts per WQEs an
// iteration: UpTo + iter*per, wrapped to 16 bits. It is what a re-armed SEND_EN or RECV_EN
// carries.
func (e Enable) At(per uint32, iter uint64) uint32 { return WQ.At(e.UpTo, per, iter) }

// Enabled reports whether the WQE of cumulative producer index idx (any width) may run on a
// managed queue enabled up to upto (exclusive): idx < upto, modulo 2^16.
func Enabled(idx uint64, upto uint32) bool { return !WQ.Reached(uint32(idx), upto) }

// Raise is the enable index of a queue enabled up to cur after an ENABLE up to upto: the larger
// of the two, cyclically. Enabling never takes back what ran; lowering emits each queue's
// ENABLEs in increasing order, so on its plans raising and setting the index agree.
func Raise(cur, upto uint32) uint32 {
	if WQ.Reached(cur, upto) {
		return WQ.Wrap(uint64(cur))
	}
	return WQ.Wrap(uint64(upto))
}
