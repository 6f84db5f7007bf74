package ir

// SendsMessage reports whether op sends a message that a recv of its queue's peer takes: a
// send, or a notify write (whose data lands at its destination; its recv takes no slice).
func (op *Op) SendsMessage() bool {
	return op.Kind == OpSend || op.Kind == OpWrite && op.Notify
}

// MatchFaultKind says how a queue's messages break the matching rule (MatchQueue).
type MatchFaultKind uint8

const (
	UnmatchedSend  MatchFaultKind = iota // a message past the last recv its peer posts
	UnmatchedRecv                        // a recv past the last message of the queue
	LengthMismatch                       // a send and its recv of different sizes in bytes
	NotifySlice                          // a notify write's recv takes a slice
)

// MatchFault is one break of the matching rule.
type MatchFault struct {
	Kind MatchFaultKind
	Send OpID // the message (None for UnmatchedRecv)
	Recv OpID // its recv (None for UnmatchedSend)
	// Sent is the number of messages on the queue before Send (UnmatchedSend), or all of them
	// (UnmatchedRecv).
	Sent int
}

// MatchQueue matches the messages sent on queue q (its sends and notify writes, in order) with
// the recvs its peer posts, the k-th with the k-th, and sets the Match of both. A send and its
// recv must have the same size in bytes, and a notify write's recv takes no slice. MatchQueue
// calls fault for each break of the rule, in order (the pairs that break it are matched all
// the same), and stops when fault returns false; it reports whether the queue had none. A
// queue without a peer (Peer None) has nothing to match.
//
// MatchQueue sets ops' Match: it is for whoever builds a graph, before Freeze. Queues may be
// matched in parallel, as each op is matched from one queue only (its own, or its queue's peer).
func (g *Graph) MatchQueue(q QueueID, fault func(MatchFault) bool) bool {
	qu := &g.Queues[q]
	if qu.Peer == None {
		return true
	}
	ok := true
	recvs := g.Queues[qu.Peer].RecvOps
	k := 0
	for _, sid := range qu.SendOps {
		s := &g.Ops[sid]
		if !s.SendsMessage() {
			continue
		}
		if k >= len(recvs) {
			ok = false
			if !fault(MatchFault{Kind: UnmatchedSend, Send: sid, Recv: None, Sent: k}) {
				return false
			}
			k++
			continue
		}
		rid := recvs[k]
		r := &g.Ops[rid]
		s.Match, r.Match = rid, sid
		k++
		var bad MatchFaultKind
		switch {
		case s.Kind == OpWrite && r.Dst.Valid():
			bad = NotifySlice
		case s.Kind == OpSend && g.SegsBytes(s.SrcSegs()) != g.SegsBytes(r.DstSegs()):
			bad = LengthMismatch
		default:
			continue
		}
		ok = false
		if !fault(MatchFault{Kind: bad, Send: sid, Recv: rid, Sent: k - 1}) {
			return false
		}
	}
	for sent := k; k < len(recvs); k++ {
		ok = false
		if !fault(MatchFault{Kind: UnmatchedRecv, Send: None, Recv: recvs[k], Sent: sent}) {
			return false
		}
	}
	return ok
}
