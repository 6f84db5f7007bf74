package ir

// The landing rule (docs/language.md, Waiting for landings): what a remote op brings to a
// region of a rank that a wait counts, or to a word that a wait watches, when it lands there.
// The checks (planner/verify) find which landings a wait needs by it, the compilers and the
// engines set thresholds by it, and the replay proves them by it.

// LandWeight is what op x brings, when it lands, to region reg of rank r that a wait counts
// writes into (word false), or to the word reg that a wait watches (word true): 1 for a write
// that lands wholly inside the region, the addend of an atomic add into the word, 0 for any
// other op. The checks refuse the plans in which anything else changes a watched word or a
// write lands partly inside a counted region.
func (g *Graph) LandWeight(x OpID, r int, reg Slice, word bool) int64 {
	op := &g.Ops[x]
	if !op.Kind.OnQueue() || g.Queues[op.Queue].PeerRank != r || !op.Dst.Within(reg) {
		return 0
	}
	switch {
	case word && op.Kind == OpAtomicAdd:
		return op.A()
	case !word && op.Kind == OpWrite:
		return 1
	}
	return 0
}

// Landing is what lands in region reg of rank r in one iteration, as LandWeight weighs it: the
// writes into a counted region, the sum of the atomic adds into a watched word. The sum wraps
// modulo 2^64, as the NIC's adds do: a caller reads it as a uint64, which is exact for the plans
// the checks pass (they refuse a word whose adds can take it past the largest value of its type,
// so the adds bring at most 2^64 - 1 in all).
func (g *Graph) Landing(r int, reg Slice, word bool) int64 {
	var n int64
	for i := range g.Ops {
		n += g.LandWeight(OpID(i), r, reg, word)
	}
	return n
}
