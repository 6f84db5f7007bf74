// Package simgrid runs a plan on SimGrid (https://simgrid.org, Debian's libsimgrid-dev): the
// plan's sends, receives, writes, reads, atomics and host steps become SimGrid activities (execs
// on the ranks' hosts, comms between them) with the plan's dependencies, on a fat-tree platform,
// and SimGrid's network model (links shared max-min between the flows that cross them) says how
// long the iteration takes. It is the contended counterpart of package predict, whose model gives
// every message the same latency and its sender's bandwidth.
//
// SimGrid is driven by a small C++ program (engine.cc) that coredag builds with g++ against
// libsimgrid the first time it is needed and keeps in a cache directory.
package simgrid

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/predict"
)

// Schedule is a plan as SimGrid activities: execs (on one rank's host, in flops: the platform's
// hosts compute 1 Gflop/s, so a flop is a nanosecond) and comms (bytes from one rank's host to
// another's), and the dependencies between them.
type Schedule struct {
	Ranks int
	acts  []activity
	deps  [][2]int32 // B starts after A finished
	op    []ir.OpID  // the op each activity belongs to
	g     *ir.Graph
}

type activity struct {
	comm     bool
	src, dst int32   // exec: src is the host
	amount   float64 // exec: flops (ns); comm: bytes
}

// Activities is how many activities the schedule has.
func (s *Schedule) Activities() int { return len(s.acts) }

// Dependencies is how many dependencies the schedule has.
func (s *Schedule) Dependencies() int { return len(s.deps) }

// OpOf names the op activity i belongs to ("rx[3] on rank 5"), or "" when i is out of range.
func (s *Schedule) OpOf(i int) string {
	if i < 0 || i >= len(s.op) {
		return ""
	}
	return s.g.OpString(s.op[i])
}

// Build turns a plan's Graph into a schedule under the machine figures par (those of package
// predict, with the same share of bytes missing the caches, predict.MissShare):
//
//   - a send, a write or a read's or an atomic's request costs an exec of o_ns on its rank (the
//     NIC's overhead; a queue's overheads run in the queue's order), then a comm of its bytes to
//     the peer rank (a read's request is a comm of 0 bytes, answered by a comm of the data back;
//     an atomic's is 8 bytes each way);
//   - a receive completes with an exec of o_ns on its rank once the matched message arrived,
//     its own predecessors completed and the receive before it on its queue completed;
//   - a reduce or a copy is an exec of host_ns plus its bytes times reduce_ns_per_byte or
//     copy_ns_per_byte; a nop is an exec of 0, and so is a wait, which also comes after the
//     landings every way of completing it includes (Graph.Lands);
//   - an op starts after the ops it comes after completed.
//
// What the platform adds (latency L_ns and bandwidth 1/G_ns_per_byte on its links) is in
// Platform. The figures of a compiled target's engine (post_ns, poll_ns, ctrl_ns, g_ns) have no
// counterpart: the schedule is of the plan's Graph, not of a target's work queues.
func Build(g *ir.Graph, par predict.Params) (*Schedule, error) {
	if err := par.Validate(); err != nil {
		return nil, err
	}
	if miss := predict.MissShare(g, par, 1); miss > 0 {
		par.B += miss * par.Mem
		par.Reduce += miss * par.Mem
		par.Copy += miss * par.Mem
	}
	s := &Schedule{Ranks: g.Ranks, g: g}
	add := func(o ir.OpID, a activity) int32 {
		s.acts = append(s.acts, a)
		s.op = append(s.op, o)
		return int32(len(s.acts) - 1)
	}
	dep := func(a, b int32) { s.deps = append(s.deps, [2]int32{a, b}) }
	n := len(g.Ops)
	start := make([]int32, n) // the activity an op's predecessors gate
	done := make([]int32, n)  // the activity whose end is the op's completion
	sent := make([]int32, n)  // sends and notified writes: the comm a matched receive waits for
	for i := range g.Ops {
		o := ir.OpID(i)
		op := &g.Ops[i]
		r := int32(op.Rank)
		switch op.Kind {
		case ir.OpSend, ir.OpWrite:
			peer := int32(g.Queues[op.Queue].PeerRank)
			start[i] = add(o, activity{src: r, amount: par.O})
			c := add(o, activity{comm: true, src: r, dst: peer, amount: float64(g.SegsBytes(op.SrcSegs()))})
			dep(start[i], c)
			done[i], sent[i] = c, c
		case ir.OpRead, ir.OpAtomicAdd, ir.OpAtomicCAS:
			peer := int32(g.Queues[op.Queue].PeerRank)
			req, back := 8.0, 8.0
			if op.Kind == ir.OpRead {
				req, back = 0, float64(g.SegsBytes(op.DstSegs()))
			}
			start[i] = add(o, activity{src: r, amount: par.O})
			q := add(o, activity{comm: true, src: r, dst: peer, amount: req})
			a := add(o, activity{comm: true, src: peer, dst: r, amount: back})
			dep(start[i], q)
			dep(q, a)
			done[i] = a
		case ir.OpRecv:
			start[i] = add(o, activity{src: r, amount: par.O})
			done[i] = start[i]
		case ir.OpReduce:
			start[i] = add(o, activity{src: r, amount: par.Host + float64(g.SegsBytes(op.DstSegs()))*par.Reduce})
			done[i] = start[i]
		case ir.OpCopy:
			start[i] = add(o, activity{src: r, amount: par.Host + float64(g.SegsBytes(op.DstSegs()))*par.Copy})
			done[i] = start[i]
		default:
			start[i] = add(o, activity{src: r})
			done[i] = start[i]
		}
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind == ir.OpRecv {
			m := op.Match
			if m == ir.None {
				return nil, fmt.Errorf("simgrid: %s matches no message", g.OpString(ir.OpID(i)))
			}
			if k := g.Ops[m].Kind; k != ir.OpSend && k != ir.OpWrite {
				return nil, fmt.Errorf("simgrid: %s matches %s, which sends no message", g.OpString(ir.OpID(i)), g.OpString(m))
			}
			dep(sent[m], done[i])
		}
		for _, p := range g.Preds(ir.OpID(i)) {
			dep(done[p], start[i])
		}
	}
	// a wait completes after the landings every way of completing it includes (Graph.Lands)
	for _, e := range g.Lands {
		dep(done[e.From], done[e.To])
	}
	// each side of a queue is FIFO: the send side's overheads in order, the receives in order
	for q := range g.Queues {
		wq := &g.Queues[q]
		for k := 1; k < len(wq.SendOps); k++ {
			dep(start[wq.SendOps[k-1]], start[wq.SendOps[k]])
		}
		for k := 1; k < len(wq.RecvOps); k++ {
			dep(done[wq.RecvOps[k-1]], done[wq.RecvOps[k]])
		}
	}
	if len(s.acts) > 1<<31-1 {
		return nil, fmt.Errorf("simgrid: %d activities: too many", len(s.acts))
	}
	return s, nil
}

// WriteTo writes the schedule in the text engine.cc reads.
func (s *Schedule) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	var n int64
	line := make([]byte, 0, 64)
	put := func(b []byte) {
		k, _ := bw.Write(b)
		n += int64(k)
	}
	put(fmt.Appendf(nil, "coredag-simgrid-schedule 1\nhosts %d\nacts %d\n", s.Ranks, len(s.acts)))
	for _, a := range s.acts {
		line = line[:0]
		if a.comm {
			line = append(line, "c "...)
			line = strconv.AppendInt(line, int64(a.src), 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, int64(a.dst), 10)
		} else {
			line = append(line, "e "...)
			line = strconv.AppendInt(line, int64(a.src), 10)
		}
		line = append(line, ' ')
		line = strconv.AppendFloat(line, a.amount, 'g', -1, 64)
		put(append(line, '\n'))
	}
	put(fmt.Appendf(nil, "deps %d\n", len(s.deps)))
	for _, d := range s.deps {
		line = strconv.AppendInt(line[:0], int64(d[0]), 10)
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(d[1]), 10)
		put(append(line, '\n'))
	}
	return n, bw.Flush()
}
