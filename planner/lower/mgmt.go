package lower

import (
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

// mgmtCapacity is the most WQEs one management queue may carry per iteration on target t.
func mgmtCapacity(t *ir.Target) int {
	return min(int(wait.WQ.Half())-1, t.MaxWQDepth)
}

// splitMgmt cuts rank r's management chain over as many management queues as its length needs
// on the target (see above). It runs once the rank's chains are built, before signalRank, which
// gives the WAITs that open the pieces their counts.
func (w *worker) splitMgmt(r int) {
	c := w.c
	rp := &c.plan.Ranks[r]
	capacity := mgmtCapacity(&c.t)
	if rp.Mgmt < 0 || capacity < 2 || len(rp.Queues[rp.Mgmt].Chain) <= capacity {
		return // capacity 1 leaves no room beside the opening WAIT: the limit check reports it
	}
	chain := rp.Queues[rp.Mgmt].Chain
	rp.Queues[rp.Mgmt].Chain = chain[:capacity]
	rest := chain[capacity:]
	prev := rp.Mgmt
	for n := 1; len(rest) > 0; n++ {
		k := min(len(rest), capacity-1)
		wi, ci := len(rp.Queues), len(rp.CQs)
		name := "mgmt" + strconv.Itoa(n)
		q := ir.WorkQueue{Name: name, Kind: ir.MgmtQueue, Queue: ir.None, CQ: ci}
		q.Chain = append(w.chains.get(wi), pieceWait(rp, prev, rest[0].Op))
		q.Chain = append(q.Chain, rest[:k]...)
		rest = rest[k:]
		w.naiveWaits++ // a naive lowering needs the piece's WAIT as much
		rp.Queues = append(rp.Queues, q)
		rp.CQs = append(rp.CQs, ir.CQ{Name: name + ".cq", Queue: wi})
		prev = wi
	}
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
