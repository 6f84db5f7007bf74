package lower

import (
	"math/bits"
	"strconv"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/wait"
)

// Management queues past one queue's reach.
//
// The managed style puts a rank's WAITs and ENABLEs on one management queue, whose whole chain
// is posted before the iteration runs. That chain must fit the queue (at most the target's
// MaxWQDepth WQEs) and stay below half the 16-bit work queue index space, so that its producer
// indices compare unambiguously (wait.WQ.Check). A rank with more management entries per
// iteration than that (the ring allreduce at 16,384 ranks has 65,532 on rank 0) has its chain
// cut into consecutive pieces, each on a management queue of its own ("mgmt", "mgmt1", ...),
// every piece after the first opening with a CQE_WAIT for the completion of the last entry of
// the piece before it. The pieces thus run one after the other, in the order of the single
// chain: every WAIT and ENABLE is met at the same point of the same sequence as on one queue, so
// the WAIT minimisation, which reasons about what that one queue has seen, stays valid, and the
// extra WAITs are the only cost (one per piece). The last entry of every chain is signalled
// (signalRank), so each piece's end is a completion the next piece can count. The first piece
// keeps the management queue's index, name and CQ, and the others are appended after the rank's
// other work queues and CQs, so a plan whose chain fits one queue compiles as it always did.
//
// The inline style has no management queue: a data send queue holds the WAITs that guard its
// WQEs and the RECV_ENs of its queue pair's managed receive queue. When that chain is longer than
// one queue holds (the ring allreduce at 16,384 ranks: 32,766 messages and 32,765 WAITs on
// right.sq), the queue is run as the managed style runs it: its data WQEs stay, managed, and the
// WAITs and ENABLEs go to a management queue of its own (manageSend), spread over pieces as above.

// mgmtCapacity is the most WQEs one management queue may carry per iteration on target t: below
// half the index space, and no more than the largest queue it can have, whose depth is a power
// of two (signalRank sizes management queues so).
func mgmtCapacity(t *ir.Target) int {
	most := 0
	if t.MaxWQDepth > 0 {
		most = 1 << (bits.Len(uint(t.MaxWQDepth)) - 1)
	}
	return min(int(wait.WQ.Half())-1, most)
}

// splitMgmt fits rank r's management entries to the target's queues (see above): in the managed
// style it spreads the management chain over pieces; in the inline style it takes the WAITs and
// ENABLEs of a data send queue too long to hold them out to management queues of its own
// (manageSend). It runs once the rank's chains are built, before signalRank, which gives the
// WAITs that open the pieces their counts.
func (w *worker) splitMgmt(r int) {
	c := w.c
	rp := &c.plan.Ranks[r]
	capacity := mgmtCapacity(&c.t)
	if capacity < 2 {
		return // no room beside the WAIT that opens a piece: the limit check reports the chain
	}
	switch c.t.Style {
	case ir.StyleManaged:
		if rp.Mgmt >= 0 {
			w.spread(rp, rp.Mgmt, capacity)
		}
	case ir.StyleInline:
		for wi, n := 0, len(rp.Queues); wi < n; wi++ {
			if q := &rp.Queues[wi]; q.Kind == ir.SendQueue && len(q.Chain) > capacity {
				w.manageSend(rp, wi, capacity)
			}
		}
	}
}

// spread cuts the chain of management queue wi into pieces of at most capacity WQEs: wi keeps
// the first, and each next goes on a new management queue named after wi's with a number, after
// a WAIT for the end of the piece before.
func (w *worker) spread(rp *ir.RankPlan, wi, capacity int) {
	chain := rp.Queues[wi].Chain
	if len(chain) <= capacity {
		return
	}
	base := rp.Queues[wi].Name
	rp.Queues[wi].Chain = chain[:capacity]
	rest := chain[capacity:]
	prev := wi
	for n := 1; len(rest) > 0; n++ {
		k := min(len(rest), capacity-1)
		qi, ci := len(rp.Queues), len(rp.CQs)
		name := base + strconv.Itoa(n)
		q := ir.WorkQueue{Name: name, Kind: ir.MgmtQueue, Queue: ir.None, CQ: ci}
		q.Chain = append(w.chains.get(qi), pieceWait(rp, prev, rest[0].Op))
		q.Chain = append(q.Chain, rest[:k]...)
		rest = rest[k:]
		w.naiveWaits++ // a naive lowering needs the piece's WAIT as much
		rp.Queues = append(rp.Queues, q)
		rp.CQs = append(rp.CQs, ir.CQ{Name: name + ".cq", Queue: qi})
		prev = qi
	}
}

// manageSend turns data send queue wi of an inline-style rank, whose chain of data WQEs, WAITs
// and RECV_ENs is longer than one queue holds, into a managed queue of its data WQEs alone, run
// by a management queue of its own ("right.mgmt" for right.sq, spread over pieces if need be)
// that holds the chain's WAITs and RECV_ENs in their order, each run of data WQEs that followed
// one another in the chain replaced by one SEND_EN letting them go. Every entry is thus held back
// by the same WAITs as in the chain, and by nothing else: the management queue never waits for a
// data WQE to start, so it blocks less than the chain did and adds no deadlock. A chain of data
// WQEs alone is left as it is (nothing to take out; the limit check reports it).
func (w *worker) manageSend(rp *ir.RankPlan, wi, capacity int) {
	q := &rp.Queues[wi]
	chain := q.Chain
	data := 0
	for k := range chain {
		if chain[k].Opcode.IsData() {
			data++
		}
	}
	if data == len(chain) {
		return
	}
	mi := len(rp.Queues)
	mgmt := w.chains.get(mi)
	sc := &w.scratch
	n := 0     // data WQEs kept so far, compacted in place
	open := -1 // the SEND_EN in mgmt that the next data WQE joins, if nothing came between
	for k := range chain {
		e := chain[k]
		if !e.Opcode.IsData() {
			mgmt = append(mgmt, e)
			open = -1
			continue
		}
		chain[n] = e
		n++
		w.naiveEnables++ // one per managed WQE
		sc.loc[e.Op-sc.first] = ir.Loc{Queue: wi, Index: n - 1}
		if open >= 0 {
			mgmt[open].UpTo, mgmt[open].Op = uint32(n), e.Op
			continue
		}
		open = len(mgmt)
		mgmt = append(mgmt, ir.WQE{Opcode: ir.OpcSendEnable, Op: e.Op, Peer: -1, Local: ir.NoSeg, Remote: ir.NoSeg,
			Wait: noCond, Enable: wait.Enable{Queue: int32(wi), UpTo: uint32(n)}})
	}
	q.Chain = chain[:n]
	q.Managed = true
	name := q.Name
	if i := len(name) - len(".sq"); i > 0 && name[i:] == ".sq" {
		name = name[:i]
	}
	name += ".mgmt"
	rp.Queues = append(rp.Queues, ir.WorkQueue{Name: name, Kind: ir.MgmtQueue, Queue: ir.None, CQ: len(rp.CQs), Chain: mgmt})
	rp.CQs = append(rp.CQs, ir.CQ{Name: name + ".cq", Queue: mi})
	w.spread(rp, mi, capacity)
}

// pieceWait is the CQE_WAIT that opens a piece of a management chain: it holds back op o (the
// first the piece serves) until the last entry of management queue prev has completed. Its CQ is
// set here, unlike the WAITs for ops, whose CQ signalRank finds from the op; signalRank sets its
// count to every completion of prev's chain. Its Op, for diagnostics, is the op of that last
// entry.
func pieceWait(rp *ir.RankPlan, prev int, o ir.OpID) ir.WQE {
	pc := rp.Queues[prev].Chain
	return ir.WQE{Opcode: ir.OpcWait, Op: o, Peer: -1, Local: ir.NoSeg, Remote: ir.NoSeg, Enable: noEnable,
		Wait: ir.Cond{Cond: wait.Cond{CQ: int32(rp.Queues[prev].CQ)}, Op: pc[len(pc)-1].Op}}
}
