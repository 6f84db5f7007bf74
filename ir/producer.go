package ir

// Locating chain entries in a compiled Plan: where an op landed, and which WQE produces a given
// completion of a CQ. Hang diagnoses and plan drawings name WQEs this way, and they must agree
// with the counts signal gave the WAITs (both count the WQEs that Complete); plans read from
// JSON may be malformed, so every index is checked.

// Place is where op id landed: its rank and the rank-local work queue and chain index of its
// WQE (the HOST entry for host ops). ok is false when id or its location is out of the plan's
// bounds.
func (p *Plan) Place(id OpID) (rank int, loc Loc, ok bool) {
	if id < 0 || int(id) >= len(p.Loc) || int(id) >= len(p.Graph.Ops) {
		return 0, Loc{}, false
	}
	r := int(p.Graph.Ops[id].Rank)
	l := p.Loc[id]
	if r < 0 || r >= len(p.Ranks) || l.Queue < 0 || l.Queue >= len(p.Ranks[r].Queues) ||
		l.Index < 0 || l.Index >= len(p.Ranks[r].Queues[l.Queue].Chain) {
		return 0, Loc{}, false
	}
	return r, l, true
}

// Producer finds the WQE that produces the count-th completion (1-based, iteration 0) of CQ
// cq of rank rank: the count-th entry that Completes in the chain of the work queue the CQ
// serves. A CQ serves one work queue, so the answer is unique. queue and index locate the
// WQE in RankPlan.Queues; ok is false when count is 0, an index is out of bounds, or the chain
// produces fewer completions.
func (p *Plan) Producer(rank, cq int, count uint32) (queue, index int, ok bool) {
	if count == 0 || rank < 0 || rank >= len(p.Ranks) {
		return 0, 0, false
	}
	rp := &p.Ranks[rank]
	if cq < 0 || cq >= len(rp.CQs) {
		return 0, 0, false
	}
	q := rp.CQs[cq].Queue
	if q < 0 || q >= len(rp.Queues) {
		return 0, 0, false
	}
	var seen uint32
	for i := range rp.Queues[q].Chain {
		if !rp.Queues[q].Chain[i].Completes() {
			continue
		}
		if seen++; seen == count {
			return q, i, true
		}
	}
	return 0, 0, false
}
