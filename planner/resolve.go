package planner

import "sort"

// resolveRank binds the names used on the current rank once all its declarations are known:
// each op's queue, and every dependency edge.
func (el *elaborator) resolveRank() {
	g := el.g
	span := g.Rank[el.rank]
	for i, ref := range el.opQueue {
		id := span.FirstOp + OpID(i)
		op := &g.Ops[id]
		if !op.Kind.OnQueue() {
			continue
		}
		qid, ok := el.queueIdx[ref.name]
		if !ok {
			el.errorf(phaseNames, ref.pos, "queue %s is not defined on this rank%s", ref.name, suggest(ref.name, el.queueNames(span)))
			continue
		}
		op.Queue = qid
		q := &g.Queues[qid]
		if op.Kind.IsRecvSide() {
			op.Index = len(q.RecvOps)
			q.RecvOps = append(q.RecvOps, id)
		} else {
			op.Index = len(q.SendOps)
			q.SendOps = append(q.SendOps, id)
		}
	}
	for _, p := range el.pending {
		from, ok := el.lookupOp(p.from)
		if !ok {
			continue
		}
		to := p.to
		if to == None {
			if to, ok = el.lookupOp(p.toBy); !ok {
				continue
			}
		}
		g.Edges = append(g.Edges, Edge{From: from, To: to, Pos: p.from.pos})
	}
}

func (el *elaborator) lookupOp(n opName) (OpID, bool) {
	if id, ok := el.opIdx[n.name]; ok {
		return id, true
	}
	if el.opNames[n.base] && n.name != n.base {
		el.errorf(phaseNames, n.pos, "%s is not defined on this rank, though other %s ops are: guard the reference with an if, or fix the index", n.name, n.base)
	} else {
		known := make([]string, 0, len(el.opNames))
		for b := range el.opNames {
			known = append(known, b)
		}
		sort.Strings(known)
		el.errorf(phaseNames, n.pos, "unknown op %s%s", n.name, suggest(n.base, known))
	}
	return None, false
}

func (el *elaborator) queueNames(span RankSpan) []string {
	var names []string
	for q := span.FirstQueue; q < QueueID(len(el.g.Queues)); q++ {
		names = append(names, el.g.Queues[q].Name)
	}
	return names
}

// pairQueues connects every queue to its peer and checks that the pairing is mutual.
func (el *elaborator) pairQueues() {
	g := el.g
	type key struct {
		rank int
		name string
	}
	byName := make(map[key]QueueID, len(g.Queues))
	for i := range g.Queues {
		byName[key{g.Queues[i].Rank, g.Queues[i].Name}] = QueueID(i)
	}
	for i := range g.Queues {
		q := &g.Queues[i]
		ref := el.peerRefs[i]
		pid, ok := byName[key{q.PeerRank, ref.name}]
		if !ok {
			el.diag[phaseMatch].add(ref.pos, q.Rank, "queue %s connects to rank %d, which has no queue %s to pair with: declare it there, or name its queue with `peer`", q.Name, q.PeerRank, ref.name)
			continue
		}
		p := &g.Queues[pid]
		back := el.peerRefs[pid].name
		if p.PeerRank != q.Rank || back != q.Name {
			el.diag[phaseMatch].add(ref.pos, q.Rank, "queue %s pairs with %s on rank %d, but that queue pairs with %s on rank %d: a pairing must be mutual", q.Name, p.Name, q.PeerRank, back, p.PeerRank)
			continue
		}
		q.Peer = pid
	}
}

// matchMessages matches the k-th send (or notify write) on each queue with the k-th recv its
// peer posts, and checks their lengths.
func (el *elaborator) matchMessages() {
	g := el.g
	for i := range g.Queues {
		q := &g.Queues[i]
		if q.Peer == None {
			continue
		}
		recvs := g.Queues[q.Peer].RecvOps
		k := 0
		for _, sid := range q.SendOps {
			s := &g.Ops[sid]
			if s.Kind != OpSend && !(s.Kind == OpWrite && s.Notify) {
				continue
			}
			if k >= len(recvs) {
				el.diag[phaseMatch].add(s.Pos, s.Rank, "%s %s has no matching recv: rank %d posts %d recvs on %s but this rank sends at least %d messages on %s",
					s.Kind, s.Name, q.PeerRank, len(recvs), g.Queues[q.Peer].Name, k+1, q.Name)
				k++
				continue
			}
			r := &g.Ops[recvs[k]]
			s.Match, r.Match = recvs[k], sid
			k++
			if s.Kind == OpWrite {
				if r.Dst.Valid() {
					el.diag[phaseMatch].add(r.Pos, r.Rank, "recv %s takes a slice but is matched by notify write %s on rank %d (%s): a notify write's data lands at its destination, so its recv takes no slice",
						r.Name, s.Name, s.Rank, s.Pos)
				}
				continue
			}
			if sb, rb := g.Bytes(s.Src), g.Bytes(r.Dst); sb != rb {
				el.diag[phaseMatch].add(s.Pos, s.Rank, "send %s of %d bytes (%s) is matched by recv %s of %d bytes (%s) on rank %d at %s: lengths must be equal",
					s.Name, sb, g.SliceString(s.Src), r.Name, rb, g.SliceString(r.Dst), r.Rank, r.Pos)
			}
		}
		for sent := k; k < len(recvs); k++ {
			r := &g.Ops[recvs[k]]
			el.diag[phaseMatch].add(r.Pos, r.Rank, "recv %s is never matched: rank %d sends only %d messages on %s, the peer of %s",
				r.Name, q.Rank, sent, q.Name, g.Queues[q.Peer].Name)
		}
	}
}
