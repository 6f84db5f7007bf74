package predict

import (
	"bufio"
	"fmt"
	"io"
	"math"

	"github.com/coredag/coredag/ir"
)

// WriteGOAL writes a plan's Graph as a GOAL schedule, the text LogGOPSim and ATLAHS read: per
// rank, its ops as `send`, `recv` and `calc` with labels, and their dependencies as `requires`
// (the `after` edges: the predecessor completed) and `irequires` (queue order: the op before it on
// its queue side started).
//
// GOAL is two-sided, so one-sided ops become messages: a write is a send matched by a receive
// the target posts at the start (a notified write keeps the plan's own receive); a read or an
// atomic is a request (0 bytes, or 8 for an atomic) to the target, whose NIC answers with the
// data (a send that requires the request's receive). Messages of one queue are told apart by tag:
// the sending queue's ID times 4, plus 1 for plain writes, 2 for requests and 3 for answers.
// A reduce or copy is `calc` of its bytes times par's per-byte figure plus host_ns, in
// nanoseconds (LogGOPSim's time unit); a nop is `calc 0`. Labels are `o` and the op's index in
// the Graph (`o12`), with `o12r` for a read's request, `q12` and `a12` for its target's side
// and `w12` for the receive of a plain write.
func WriteGOAL(w io.Writer, g *ir.Graph, par Params) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "num_ranks %d\n", g.Ranks)
	label := func(o ir.OpID) string { return fmt.Sprintf("o%d", o) }
	// the extra ops each rank gets: receives of plain writes, answers of reads and atomics
	extras := make([][]string, g.Ranks)
	for i := range g.Ops {
		op := &g.Ops[i]
		if !op.Kind.OnQueue() || op.Kind == ir.OpRecv {
			continue
		}
		q := &g.Queues[op.Queue]
		tag := int64(op.Queue) * 4
		switch {
		case op.Kind == ir.OpWrite && !op.Notify:
			extras[q.PeerRank] = append(extras[q.PeerRank], fmt.Sprintf("w%d: recv %db from %d tag %d", i, g.Bytes(op.Dst), op.Rank, tag+1))
		case op.Kind == ir.OpRead || op.Kind.IsAtomic():
			n := int64(8)
			if op.Kind == ir.OpRead {
				n = g.SegsBytes(op.DstSegs())
			}
			extras[q.PeerRank] = append(extras[q.PeerRank],
				fmt.Sprintf("q%d: recv 0b from %d tag %d", i, op.Rank, tag+2),
				fmt.Sprintf("a%d: send %db to %d tag %d", i, n, op.Rank, tag+3),
				fmt.Sprintf("a%d requires q%d", i, i))
		}
	}
	lands := map[ir.OpID][]ir.OpID{} // by wait: the writes and adds whose landing it needs
	for _, e := range g.Lands {
		lands[e.To] = append(lands[e.To], e.From)
	}
	for r := 0; r < g.Ranks; r++ {
		fmt.Fprintf(bw, "\nrank %d {\n", r)
		first, end := g.RankOps(r)
		prev := map[[2]int64]ir.OpID{} // the last op on each queue side
		for o := first; o < end; o++ {
			op := &g.Ops[o]
			l := label(o)
			switch op.Kind {
			case ir.OpSend:
				q := &g.Queues[op.Queue]
				fmt.Fprintf(bw, "%s: send %db to %d tag %d\n", l, g.SegsBytes(op.SrcSegs()), q.PeerRank, int64(op.Queue)*4)
			case ir.OpWrite:
				q := &g.Queues[op.Queue]
				tag := int64(op.Queue) * 4
				if !op.Notify {
					tag++
				}
				fmt.Fprintf(bw, "%s: send %db to %d tag %d\n", l, g.SegsBytes(op.SrcSegs()), q.PeerRank, tag)
			case ir.OpRecv:
				q := &g.Queues[op.Queue]
				n := int64(0)
				if m := op.Match; m != ir.None { // the send's or the notified write's bytes
					n = g.SegsBytes(g.Ops[m].SrcSegs())
				}
				fmt.Fprintf(bw, "%s: recv %db from %d tag %d\n", l, n, q.PeerRank, int64(q.Peer)*4)
			case ir.OpRead, ir.OpAtomicAdd, ir.OpAtomicCAS:
				q := &g.Queues[op.Queue]
				tag := int64(op.Queue) * 4
				n := int64(8)
				if op.Kind == ir.OpRead {
					n = g.SegsBytes(op.DstSegs())
				}
				fmt.Fprintf(bw, "%s: send 0b to %d tag %d\n", l+"r", q.PeerRank, tag+2)
				fmt.Fprintf(bw, "%s: recv %db from %d tag %d\n", l, n, q.PeerRank, tag+3)
				fmt.Fprintf(bw, "%s requires %s\n", l, l+"r")
			default:
				fmt.Fprintf(bw, "%s: calc %d\n", l, int64(math.Round(hostNs(g, o, par))))
			}
			start := l
			if op.Kind == ir.OpRead || op.Kind.IsAtomic() {
				start = l + "r"
			}
			if op.Kind.OnQueue() {
				side := int64(0)
				if op.Kind == ir.OpRecv {
					side = 1
				}
				k := [2]int64{int64(op.Queue), side}
				if p, ok := prev[k]; ok {
					ps := label(p)
					if k := g.Ops[p].Kind; k == ir.OpRead || k.IsAtomic() {
						ps += "r"
					}
					fmt.Fprintf(bw, "%s irequires %s\n", start, ps)
				}
				prev[k] = o
			}
			for _, p := range g.Preds(o) {
				fmt.Fprintf(bw, "%s requires %s\n", start, label(ir.OpID(p)))
			}
			for _, c := range lands[o] { // a wait ends after the landings it needs
				fmt.Fprintf(bw, "%s requires %s\n", l, landLabel(g, c))
			}
		}
		for _, x := range extras[r] {
			fmt.Fprintln(bw, x)
		}
		fmt.Fprintln(bw, "}")
	}
	return bw.Flush()
}

// hostNs is the CPU time of host op o under par.
func hostNs(g *ir.Graph, o ir.OpID, par Params) float64 {
	op := &g.Ops[o]
	switch op.Kind {
	case ir.OpReduce:
		return par.Host + float64(g.SegsBytes(op.DstSegs()))*par.Reduce
	case ir.OpCopy:
		return par.Host + float64(g.SegsBytes(op.DstSegs()))*par.Copy
	}
	return 0
}

// landLabel is the op of the schedule, on the rank a write or atomic c lands on, that stands for
// its landing: the receive of a plain write, the matched recv of a notified one, the request of an
// atomic.
func landLabel(g *ir.Graph, c ir.OpID) string {
	op := &g.Ops[c]
	switch {
	case op.Kind == ir.OpWrite && op.Notify && op.Match != ir.None:
		return fmt.Sprintf("o%d", op.Match)
	case op.Kind == ir.OpWrite:
		return fmt.Sprintf("w%d", c)
	}
	return fmt.Sprintf("q%d", c)
}
