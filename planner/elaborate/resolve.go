package elaborate

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate/internal/arena"
)

// resolveRank binds the names used on the current rank once all its declarations are known:
// each op's queue, and every dependency edge.
func (el *elaborator) resolveRank() {
	g := el.g
	span := g.Rank[el.rank]
	for i, ref := range el.opQueue {
		id := span.FirstOp + ir.OpID(i)
		op := el.opOf(id)
		if !op.Kind.OnQueue() {
			continue
		}
		qid, ok := find(el, el.queueIdx, ref)
		if !ok {
			name, base := el.text(&ref), ref.info.n.Ident.Name
			if !el.broken.queues.has(name, base) { // else its declaration failed and was reported
				el.unknownName(ref.info.n.Pos(), base, name, name, el.queueNames(span), "queue %s is not defined on this rank%s")
			}
			continue
		}
		op.Queue = qid
		q := el.queueOf(qid)
		if (op.Kind == ir.OpWrite || op.Kind == ir.OpRead) && q.Loopback() {
			// Both slices are in this rank's memory, and DMA gives overlapping ranges no order.
			for _, a := range op.SrcSegs() {
				for _, b := range op.DstSegs() {
					el.noOverlap(a, b, op.Pos, "loopback "+op.Kind.String())
				}
			}
		}
		if op.Kind.IsRecvSide() {
			op.Index = int32(len(q.RecvOps))
			q.RecvOps = append(q.RecvOps, id)
		} else {
			op.Index = int32(len(q.SendOps))
			q.SendOps = append(q.SendOps, id)
		}
	}
	if free := cap(g.Edges) - len(g.Edges); free < len(el.pending) {
		// SPMD: the other ranks have about as many edges as this one. Grow for them all at once
		// rather than by doubling: the Graph keeps what Edges allocates. Not for more ranks than
		// the op limit leaves room for, and not past the memory budget.
		ranks := el.ranksLeft(int(span.EndOp - span.FirstOp))
		n := len(g.Edges) + len(el.pending)*ranks
		what := fmt.Sprintf("`after` edges on %s", english.Plural(el.rank-el.first+ranks, "rank"))
		if !el.room(heldEdges, el.pending[0].from.info.n.Pos(), n, unsafe.Sizeof(ir.Edge{}), what) {
			return
		}
		g.Edges = arena.GrowTo(g.Edges, n)
	}
	for _, p := range el.pending {
		from, ok := el.lookupOp(p.from)
		if !ok {
			continue
		}
		to := p.to
		if to == ir.None {
			if to, ok = el.lookupOp(p.toBy); !ok {
				continue
			}
			if i, split := el.splitOf[to]; split { // the parts of a listed op wait
				for _, part := range el.splits[i].parts {
					g.Edges = append(g.Edges, ir.Edge{From: from, To: part, Pos: p.from.info.n.Pos()})
				}
				continue
			}
		}
		g.Edges = append(g.Edges, ir.Edge{From: from, To: to, Pos: p.from.info.n.Pos()})
	}
	for _, sp := range el.splits { // and its nop waits for them
		for _, part := range sp.parts {
			g.Edges = append(g.Edges, ir.Edge{From: part, To: sp.join, Pos: sp.pos})
		}
	}
}

func (el *elaborator) lookupOp(r ref) (ir.OpID, bool) {
	if id, ok := find(el, el.opIdx, r); ok {
		return id, true
	}
	name, base := el.text(&r), r.info.n.Ident.Name
	if el.broken.ops.has(name, base) {
		return ir.None, false // its declaration failed and was reported
	}
	if el.opNames == nil { // a mistake: worth the names of the rank's ops
		el.opNames = map[string]bool{}
		span := el.g.Rank[el.rank]
		for _, op := range el.g.Ops[span.FirstOp-el.opBase : span.EndOp-el.opBase] {
			base, _, _ := strings.Cut(op.Name, "[")
			el.opNames[base] = true
		}
	}
	if el.opNames[base] && name != base {
		el.errorf(phaseNames, diag.Name, r.info.n.Pos(), "%s is not defined on this rank, though other %s ops are: guard the reference with an if, or fix the index", name, base)
	} else {
		known := make([]string, 0, len(el.opNames))
		for b := range el.opNames {
			known = append(known, b)
		}
		sort.Strings(known)
		el.unknownName(r.info.n.Pos(), base, base, name, known, "unknown op %s%s")
	}
	return ir.None, false
}

func (el *elaborator) queueNames(span ir.RankSpan) []string {
	var names []string
	for q := span.FirstQueue; q < el.nextQueue(); q++ {
		names = append(names, el.queueOf(q).Name)
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
	byName := make(map[key]ir.QueueID, len(g.Queues))
	for i := range g.Queues {
		byName[key{g.Queues[i].Rank, g.Queues[i].Name}] = ir.QueueID(i)
	}
	named := make([]ir.QueueID, len(g.Queues)) // the queue each one names as its peer, or None
	for i := range g.Queues {
		q := &g.Queues[i]
		ref := el.peerRefs[i]
		pid, ok := byName[key{q.PeerRank, ref.name}]
		named[i] = pid
		if !ok {
			named[i] = ir.None
			el.errorOn(phaseMatch, q.Rank, diag.Match, ref.pos, "queue %s connects to rank %d, which has no queue %s to pair with: declare it there, or name its queue with `peer`", q.Name, q.PeerRank, ref.name)
		}
	}
	for i := range g.Queues {
		q, pid := &g.Queues[i], named[i]
		switch {
		case pid == ir.None:
		case named[pid] == ir.QueueID(i):
			q.Peer = pid
		case named[pid] == ir.None: // its own missing peer is the mistake, reported there
		case g.Queues[pid].Loopback():
			el.errorOn(phaseMatch, q.Rank, diag.Match, el.peerRefs[i].pos, "queue %s connects to rank %d's queue %s, but that is a loopback queue (its peer is rank %d itself): a pairing must be mutual",
				q.Name, q.PeerRank, g.Queues[pid].Name, q.PeerRank)
		default:
			p := &g.Queues[named[pid]]
			el.errorOn(phaseMatch, q.Rank, diag.Match, el.peerRefs[i].pos, "queue %s connects to rank %d's queue %s, but that queue pairs with rank %d's %s instead: both ends must name each other",
				q.Name, q.PeerRank, g.Queues[pid].Name, p.Rank, p.Name)
		}
	}
}

// matchMessages matches the k-th send (or notify write) on each queue with the k-th recv its
// peer posts, and checks their lengths. A large plan's queues are matched in parallel first
// (each op is matched from one queue only: its own, or its queue's peer); if any of them has a
// mistake, they are all matched again one after the other, which reports in order.
func (el *elaborator) matchMessages() {
	if len(el.g.Ops) >= el.parallelOps() && el.matchParallel() {
		return
	}
	for i := range el.g.Queues {
		el.matchQueue(i, true)
	}
}

// matchParallel matches the queues in parallel without reporting; it reports whether they all
// matched.
func (el *elaborator) matchParallel() bool {
	n := el.workers()
	k := min(4*n, len(el.g.Queues))
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(n, k) {
		wg.Go(func() {
			for c := next.Add(1) - 1; c < int64(k) && !failed.Load(); c = next.Add(1) - 1 {
				for i := len(el.g.Queues) * int(c) / k; i < len(el.g.Queues)*int(c+1)/k; i++ {
					if !el.matchQueue(i, false) {
						failed.Store(true)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return !failed.Load()
}

// matchQueue matches the messages sent on queue i with the recvs of its peer (ir.MatchQueue).
// It reports whether they all matched; when report is false, it stops at the first mistake,
// unreported.
func (el *elaborator) matchQueue(i int, report bool) bool {
	g := el.g
	q := &g.Queues[i]
	return g.MatchQueue(ir.QueueID(i), func(f ir.MatchFault) bool {
		if !report {
			return false
		}
		switch f.Kind {
		case ir.UnmatchedSend:
			s := &g.Ops[f.Send]
			el.errorOn(phaseMatch, int(s.Rank), diag.Match, s.Pos, "%s %s has no matching recv: rank %d posts %s on %s but this rank sends at least %s on %s",
				s.Kind, s.Name, q.PeerRank, english.Plural(len(g.Queues[q.Peer].RecvOps), "recv"), g.Queues[q.Peer].Name, english.Plural(f.Sent+1, "message"), q.Name)
		case ir.NotifySlice:
			s, r := &g.Ops[f.Send], &g.Ops[f.Recv]
			const m = "recv %s takes a slice but is matched by notify write %s on rank %d: a notify write's data lands at its destination, so its recv takes no slice"
			el.report(phaseMatch, int(r.Rank), diag.Errorf(diag.Match, r.Pos, m, r.Name, s.Name, s.Rank).
				Relate(s.Pos, fmt.Sprintf("notify write %s on rank %d", s.Name, s.Rank)), m)
		case ir.LengthMismatch:
			s, r := &g.Ops[f.Send], &g.Ops[f.Recv]
			const m = "send %s of %s is matched by recv %s of %s on rank %d: lengths must be equal"
			el.report(phaseMatch, int(s.Rank), diag.Errorf(diag.Match, s.Pos, m, s.Name, sizedSlice(g, s.SrcSegs()), r.Name, sizedSlice(g, r.DstSegs()), r.Rank).
				Relate(r.Pos, fmt.Sprintf("recv %s of %s on rank %d", r.Name, sizedSlice(g, r.DstSegs()), r.Rank)), m)
		case ir.UnmatchedRecv:
			r := &g.Ops[f.Recv]
			el.errorOn(phaseMatch, int(r.Rank), diag.Match, r.Pos, "recv %s is never matched: rank %d sends only %s on %s, the peer of %s",
				r.Name, q.Rank, english.Plural(f.Sent, "message"), q.Name, g.Queues[q.Peer].Name)
		}
		return true
	})
}

// sizedSlice describes a message buffer (a slice or a scatter/gather list) for diagnostics:
// "16 bytes (data[0:4])", "32 bytes (data[0:2], data[4:6])" or "0 bytes (no slice)".
func sizedSlice(g *ir.Graph, segs []ir.Slice) string {
	if len(segs) == 0 {
		return "0 bytes (no slice)"
	}
	return fmt.Sprintf("%d bytes (%s)", g.SegsBytes(segs), g.SegsString(segs))
}
