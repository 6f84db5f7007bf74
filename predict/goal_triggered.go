package predict

import (
	"bufio"
	"fmt"
	"io"
	"math"

	"github.com/coredag/coredag/ir"
)

// maxCounterAdd bounds the value of one counter-add WriteGOALTriggered writes (as that many
// puts of 0 bytes).
const maxCounterAdd = 64

// WriteGOALTriggered writes a plan compiled for a triggered target as a GOAL schedule with the
// Portals-style counters of LogGOPSim2: each rank's completion counters are its counter IDs
// (`ct N`), and each entry of its triggered work, in submission order, becomes an operation that
// runs at once or `when N reaches T` (its counter and threshold, iteration 0):
//
//   - a send or a notified write is a put (`put`/`tput NNb to R ct C tag T`) whose counter C is
//     its queue's completion counter; a receive is a matching entry appended to the priority
//     list (`append`/`tappend NNb to priority_list allowed R ct C use_once tag T`), whose counter
//     is raised when the message lands;
//   - a plain write is a put matched by an entry the target appends at the start, which raises
//     the target's remote-write counter of the region it lands in (a wait's region, ir.CntLand)
//     or no counter; a read is a get (`get`/`tget`) of its bytes from an entry the
//     target appends at the start; an atomic is a get of 8 bytes (LogGOPSim2 has no atomics);
//   - a host step is `test C for T` (when triggered), for a wait for landed writes also `test
//     L for N` (its region's remote-write counter and its count), then `calc NS` (host_ns plus its bytes
//     times the per-byte figure of par, in nanoseconds), then a put of 0 bytes to the rank itself
//     that raises the host counter (the CPU's counter add);
//   - a counter-add of V is V puts of 0 bytes to the rank itself raising the target counter;
//   - the entries of one work queue start in its order (`irequires`).
//
// Tags are as in WriteGOAL (the sending queue's ID times 4, plus 1, 2, 3 for plain writes, reads
// and atomics); the puts to the rank itself use the tags from 4 times the number of queues on.
// A counter-set, which LogGOPSim2 cannot express, is an error, as is a plan not compiled for a
// triggered target.
func WriteGOALTriggered(w io.Writer, p *ir.Plan, par Params) error {
	if p == nil || p.Graph == nil || p.Target.Trigger == nil {
		return fmt.Errorf("predict: the GOAL form with counters needs a plan compiled for a triggered target")
	}
	g := p.Graph
	selfTag := int64(len(g.Queues)) * 4
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "// %s compiled for %s: LogGOPSim2 counters, one iteration\nnum_ranks %d\n", g.Name, p.Target.Name, g.Ranks)
	// the entries each rank appends at the start for the plain writes, reads and atomics it serves
	serve := make([][]string, g.Ranks)
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		if rp.Trig == nil {
			continue
		}
		for _, e := range rp.Trig.Work {
			if e.Kind != ir.TrigOp {
				continue
			}
			wq := &e.Loc
			x := &rp.Queues[wq.Queue].Chain[wq.Index]
			q := int64(rp.Queues[wq.Queue].Queue)
			switch x.Opcode {
			case ir.OpcWrite:
				cts, err := landCt(p, x.Op)
				if err != nil {
					return err
				}
				serve[x.Peer] = append(serve[x.Peer], fmt.Sprintf("append %db to priority_list allowed %d%s use_once tag %d", g.SegsBytes(p.LocalSegs(x)), r, cts, q*4+1))
			case ir.OpcRead:
				serve[x.Peer] = append(serve[x.Peer], fmt.Sprintf("append %db to priority_list allowed %d use_once tag %d", g.SegsBytes(p.LocalSegs(x)), r, q*4+2))
			case ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
				serve[x.Peer] = append(serve[x.Peer], fmt.Sprintf("append 8b to priority_list allowed %d use_once tag %d", r, q*4+3))
			}
		}
	}
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		fmt.Fprintf(bw, "\nrank %d {\n", r)
		t := rp.Trig
		if t == nil {
			fmt.Fprintln(bw, "}")
			continue
		}
		for c, cnt := range t.Counters {
			fmt.Fprintf(bw, "// ct %d: %s (%s)\n", c, cnt.Name, cnt.Kind)
		}
		for k, s := range serve[r] {
			fmt.Fprintf(bw, "m%d: %s\n", k, s)
		}
		// the entries that match its puts to itself, appended first
		selfPuts := 0
		for _, e := range t.Work {
			switch {
			case e.Kind == ir.TrigAdd:
				selfPuts += int(min(e.Value, maxCounterAdd+1))
			case e.Kind == ir.TrigOp && t.HostCnt >= 0 && rp.Queues[e.Loc.Queue].Chain[e.Loc.Index].Opcode == ir.OpcHost:
				selfPuts++
			}
		}
		for k := 0; k < selfPuts; k++ {
			fmt.Fprintf(bw, "s%d: append 0b to priority_list allowed %d use_once tag %d\n", k, r, selfTag)
		}
		self := func(label string, ct int, when string) {
			op := "put"
			if when != "" {
				op = "tput"
			}
			fmt.Fprintf(bw, "%s: %s 0b to %d%s ct %d tag %d\n", label, op, r, when, ct, selfTag)
		}
		labels := map[ir.Loc]string{} // the label of each data entry, for the queues' order
		for i, e := range t.Work {
			l := fmt.Sprintf("w%d", i)
			when := ""
			if e.Counter != ir.Untriggered {
				when = fmt.Sprintf(" when %d reaches %d", e.Counter, e.Threshold)
			}
			switch e.Kind {
			case ir.TrigSet:
				return fmt.Errorf("predict: rank %d: %s sets counter %d: LogGOPSim2 has no counter-set", r, e.Name, e.Target)
			case ir.TrigAdd:
				if e.Value > maxCounterAdd {
					return fmt.Errorf("predict: rank %d: %s adds %d to counter %d: at most %d is written (as puts of 0 bytes)", r, e.Name, e.Value, e.Target, maxCounterAdd)
				}
				for v := uint64(0); v < e.Value; v++ {
					self(fmt.Sprintf("%sa%d", l, v), e.Target, when)
				}
				continue
			}
			x := &rp.Queues[e.Loc.Queue].Chain[e.Loc.Index]
			q := int64(rp.Queues[e.Loc.Queue].Queue)
			ct := -1
			if e.Loc.Queue < len(t.SendCnt) {
				ct = t.SendCnt[e.Loc.Queue]
			}
			cts := ""
			if ct >= 0 {
				cts = fmt.Sprintf(" ct %d", ct)
			}
			pre := ""
			if when != "" {
				pre = "t"
			}
			switch x.Opcode {
			case ir.OpcSend, ir.OpcWriteImm:
				fmt.Fprintf(bw, "%s: %sput %db to %d%s%s tag %d\n", l, pre, g.SegsBytes(p.LocalSegs(x)), x.Peer, when, cts, q*4)
			case ir.OpcWrite:
				fmt.Fprintf(bw, "%s: %sput %db to %d%s%s tag %d\n", l, pre, g.SegsBytes(p.LocalSegs(x)), x.Peer, when, cts, q*4+1)
			case ir.OpcRecv:
				n := int64(0)
				if m := g.Ops[x.Op].Match; m != ir.None {
					n = g.SegsBytes(g.Ops[m].SrcSegs())
				}
				peerQ := int64(g.Queues[rp.Queues[e.Loc.Queue].Queue].Peer)
				fmt.Fprintf(bw, "%s: %sappend %db to priority_list allowed %d%s%s use_once tag %d\n", l, pre, n, x.Peer, when, cts, peerQ*4)
			case ir.OpcRead:
				fmt.Fprintf(bw, "%s: %sget %db from %d%s%s tag %d\n", l, pre, g.SegsBytes(p.LocalSegs(x)), x.Peer, when, cts, q*4+2)
			case ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
				fmt.Fprintf(bw, "%s: %sget 8b from %d%s%s tag %d\n", l, pre, x.Peer, when, cts, q*4+3)
			case ir.OpcHost:
				if when != "" {
					fmt.Fprintf(bw, "%st: test %d for %d\n", l, e.Counter, e.Threshold)
				}
				k, n, landed := t.HostWait(g, x.Op)
				if landed {
					fmt.Fprintf(bw, "%sl: test %d for %d\n", l, k, n)
				}
				fmt.Fprintf(bw, "%s: calc %d\n", l, int64(math.Round(hostNs(g, x.Op, par))))
				if when != "" {
					fmt.Fprintf(bw, "%s requires %st\n", l, l)
				}
				if landed {
					fmt.Fprintf(bw, "%s requires %sl\n", l, l)
				}
				if t.HostCnt >= 0 {
					self(l+"h", t.HostCnt, "")
					fmt.Fprintf(bw, "%sh requires %s\n", l, l)
				}
				continue
			default:
				return fmt.Errorf("predict: rank %d: %s: a triggered %s has no GOAL form", r, e.Name, x.Opcode)
			}
			labels[e.Loc] = l
		}
		for qi := range rp.Queues {
			prev := ""
			for k := range rp.Queues[qi].Chain {
				if l, ok := labels[ir.Loc{Queue: qi, Index: k}]; ok {
					if prev != "" {
						fmt.Fprintf(bw, "%s irequires %s\n", l, prev)
					}
					prev = l
				}
			}
		}
		fmt.Fprintln(bw, "}")
	}
	return bw.Flush()
}

// landCt is " ct C" for write o when it lands in the region of remote-write counter C of its
// target rank, or "" when it lands in none. A GOAL entry raises one counter: a write that lands
// in the regions of two is an error.
func landCt(p *ir.Plan, o ir.OpID) (string, error) {
	g := p.Graph
	op := &g.Ops[o]
	peer := g.Queues[op.Queue].PeerRank
	t := p.Ranks[peer].Trig
	if t == nil {
		return "", nil
	}
	out := ""
	for c := range t.Counters {
		cn := &t.Counters[c]
		d, reg := op.Dst, cn.Region
		if cn.Kind != ir.CntLand || d.Buf != reg.Buf || d.Off < reg.Off || d.Off+d.Len > reg.Off+reg.Len {
			continue
		}
		if out != "" {
			return "", fmt.Errorf("predict: %s lands in the regions of two counters of rank %d (%s): a LogGOPSim2 entry raises one", g.OpString(o), peer, cn.Name)
		}
		out = fmt.Sprintf(" ct %d", c)
	}
	return out, nil
}
