// Package replay checks a compiled Plan independently of the code that lowered it. It reads only
// the Plan's chains and the Graph, and proves three things:
//
//  1. Shape: every graph op became exactly one WQE (or HOST step) on the right rank and work
//     queue, with the opcode, operands and peer its kind calls for, and per-iteration counts
//     agree with the chains.
//  2. Enforcement: for every `after` edge a -> b, b cannot start before a's completion exists, in
//     any execution. The checker builds the graph of necessary orderings of the plan's own
//     mechanisms (queue FIFO starts and in-order completions, WAITs on the k-th completion of a
//     CQ, the first ENABLE that lets a managed WQE run, fences, the CPU's host-step conditions)
//     and propagates, per event, how many entries of each work queue of the rank are guaranteed
//     complete. An edge is also accepted when RC gives the same effect: a and b on one queue in
//     that order, a not a READ/ATOMIC or b fenced (docs/language.md §8, What a plan means). On
//     the generic target the polling engine posts an op once every predecessor's completion is
//     observed (a signalled CQE at or after it), which the checker models. Edges join ops of
//     one rank, so this is done a rank at a time, holding one rank's graph.
//  3. Progress: the chains are executed abstractly for several iterations, re-armed by the
//     WAIT/ENABLE model of package wait, starting close to the 24-bit and 16-bit wraps.
//     Every entry must complete; enabling is monotone, so one maximal execution decides it for
//     all schedules. A stuck run names the blocked entries and what they wait for or, when the
//     necessary orderings of all ranks, messages included, form a cycle, that cycle.
//
// For a triggered target (RankPlan.Trig) the edges and the queue order are proven from the
// counters, thresholds and counter work alone, for every iteration of a run (trigger.go).
//
// The checks look at the context of Check between ranks and every pollSteps steps of their
// loops (internal/stop); once it is cancelled, Check stops and returns its cause.
package replay

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// Options tunes Check.
type Options struct {
	Iterations int    // iterations executed in the progress check (default 3)
	FirstIter  uint64 // iteration number of the first one executed (default: close to the wraps)
	// TriggeredWork, when positive, bounds the triggered work entries of a rank (TriggeredWork)
	// for which a triggered plan's edges, queue order and progress are proven from its counters:
	// that fixpoint costs about the cube of a rank's work. Past it only the triggered forms are
	// validated, besides the shape and progress checks of every plan.
	TriggeredWork int
}

// pollSteps is how many steps a check takes between two looks at the context: an event whose
// guarantees the enforcement check propagates, a rank the progress execution visits, a rank's
// pass of the triggered execution. A few thousand steps are well under a millisecond.
const pollSteps = 1 << 12

// Check replays p and returns every problem found, as positioned diagnostics. Once ctx is
// cancelled, it stops and returns ctx's cause (context.Cause) instead.
func Check(ctx context.Context, p *ir.Plan, opt Options) error {
	if opt.Iterations <= 0 {
		opt.Iterations = 3
	}
	if opt.FirstIter == 0 {
		opt.FirstIter = 1<<16 - 1 // WQ indices wrap during the run; CQ counts for chains with many completions
	}
	if err := stop.Cause(ctx); err != nil {
		return err
	}
	c := &checker{p: p, g: p.Graph, opt: opt}
	c.index()
	c.checkShape()
	// A stopped check finds nothing, or part of what it would: the ones after it do not run,
	// and Check returns the cause.
	if len(c.errs) == 0 {
		c.checkEnforced(ctx)
	}
	if len(c.errs) == 0 && p.Target.Trigger != nil && stop.Cause(ctx) == nil {
		c.checkTriggered(ctx)
	}
	if len(c.errs) == 0 && stop.Cause(ctx) == nil {
		c.checkProgress(ctx)
		if c.stuck {
			// Say why, when the orderings themselves loop (through messages between ranks).
			if cycle := c.deadlockCycle(); cycle != "" {
				c.errs = nil
				c.errorf(c.g.Ops[0].Pos, "the chains deadlock: their orderings form a cycle: %s", cycle)
			}
		}
	}
	if err := stop.Cause(ctx); err != nil {
		return err
	}
	c.errs.Sort()
	return c.errs.Err()
}

// entry addresses a chain entry: rank, work queue, index.
type entry struct{ r, q, i int }

type checker struct {
	p    *ir.Plan
	g    *ir.Graph
	opt  Options
	errs diag.List
	// of[op] is the entry that carries the op (data WQE or HOST step); found[op] how many did.
	of    []entry
	found []int
	// posted[r][q][i] is entry i's index among the posted entries of its queue (-1 for HOST).
	posted [][][]int32
	// signalled[r][q] lists the chain indices of the queue's signalled posted entries.
	signalled [][][]int32
	stuck     bool // the progress check found an iteration that never finishes
}

// maxErrors is the most diagnostics a replay reports.
const maxErrors = diag.MaxErrors

func (c *checker) errorf(pos diag.Pos, format string, args ...any) {
	if len(c.errs) < maxErrors {
		c.errs.Add(diag.Internal, pos, format, args...)
	}
}

func (c *checker) at(e entry) *ir.WQE { return &c.p.Ranks[e.r].Queues[e.q].Chain[e.i] }

// opOf is the graph op WQE w belongs to, whose name and statement diagnostics about w show; a
// stand-in named "?" at the plan's file when w names no op.
func (c *checker) opOf(w *ir.WQE) *ir.Op {
	if w.Op < 0 || int(w.Op) >= len(c.g.Ops) {
		return &ir.Op{Site: &ir.Site{Name: "?", Pos: c.pos()}}
	}
	return c.p.OpOf(w)
}

func (c *checker) name(e entry) string {
	return fmt.Sprintf("rank %d %s[%d] %s", e.r, c.p.Ranks[e.r].Queues[e.q].Name, e.i, c.at(e).Opcode)
}

func (c *checker) index() {
	c.of = make([]entry, len(c.g.Ops))
	c.found = make([]int, len(c.g.Ops))
	c.posted = make([][][]int32, len(c.p.Ranks))
	c.signalled = make([][][]int32, len(c.p.Ranks))
	for r := range c.p.Ranks {
		rp := &c.p.Ranks[r]
		c.posted[r] = make([][]int32, len(rp.Queues))
		c.signalled[r] = make([][]int32, len(rp.Queues))
		for q := range rp.Queues {
			chain := rp.Queues[q].Chain
			c.posted[r][q] = make([]int32, len(chain))
			n := int32(0)
			for i := range chain {
				e := &chain[i]
				if e.Opcode == ir.OpcHost {
					c.posted[r][q][i] = -1
				} else {
					c.posted[r][q][i] = n
					n++
					if e.Flags&ir.Signalled != 0 {
						c.signalled[r][q] = append(c.signalled[r][q], int32(i))
					}
				}
				if isData(e.Opcode) || e.Opcode == ir.OpcHost {
					if e.Op < 0 || int(e.Op) >= len(c.g.Ops) {
						c.errorf(c.opOf(e).Pos, "%s names no graph op", c.name(entry{r, q, i}))
						continue
					}
					c.of[e.Op] = entry{r, q, i}
					c.found[e.Op]++
				}
			}
		}
	}
}

func isData(o ir.Opcode) bool {
	switch o {
	case ir.OpcSend, ir.OpcRecv, ir.OpcWrite, ir.OpcWriteImm, ir.OpcRead,
		ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
		return true
	}
	return false
}

func readLike(o ir.Opcode) bool {
	return o == ir.OpcRead || o == ir.OpcAtomicFAdd || o == ir.OpcAtomicCAS
}

// checkShape verifies the op-to-WQE correspondence and the per-iteration counts.
func (c *checker) checkShape() {
	g := c.g
	if len(c.p.Ranks) != g.Ranks {
		c.errorf(diag.InFile(g.File), "plan has %d ranks, graph %d", len(c.p.Ranks), g.Ranks)
		return
	}
	for id := range g.Ops {
		op := &g.Ops[id]
		if c.found[id] != 1 {
			c.errorf(op.Pos, "%s appears %d times in the plan, want once", g.OpString(ir.OpID(id)), c.found[id])
			continue
		}
		e := c.of[id]
		w := c.at(e)
		wq := &c.p.Ranks[e.r].Queues[e.q]
		if e.r != int(op.Rank) {
			c.errorf(op.Pos, "%s lowered on rank %d", g.OpString(ir.OpID(id)), e.r)
		}
		want, local, remote := expect(op)
		if w.Opcode != want {
			c.errorf(op.Pos, "%s lowered to %s, want %s", g.OpString(ir.OpID(id)), w.Opcode, want)
			continue
		}
		if want == ir.OpcHost {
			if wq.Kind != ir.HostSignalQueue {
				c.errorf(op.Pos, "HOST step of %s sits on %s, not on the host-signal queue", op.Name, wq.Name)
			}
			continue
		}
		wantKind := ir.SendQueue
		if op.Kind == ir.OpRecv {
			wantKind = ir.RecvQueue
		}
		if wq.Queue != op.Queue || wq.Kind != wantKind {
			c.errorf(op.Pos, "%s lowered onto %s, not the %s side of its queue", g.OpString(ir.OpID(id)), wq.Name, wantKind)
		}
		if w.Local != local.Seg() || w.Remote != remote.Seg() {
			c.errorf(op.Pos, "%s has operands %s/%s, want %s/%s", g.OpString(ir.OpID(id)),
				g.SliceString(w.Local.Slice()), g.SliceString(w.Remote.Slice()), g.SliceString(local), g.SliceString(remote))
		}
		if peer := g.Queues[op.Queue].PeerRank; int(w.Peer) != peer {
			c.errorf(op.Pos, "%s targets rank %d, want %d", g.OpString(ir.OpID(id)), w.Peer, peer)
		}
		// Inline as the source says; a target that posts WQEs only once their inputs are ready
		// also inlines every small send and write, since the payload is final at post time.
		n := g.SegsBytes(op.SrcSegs())
		small := (op.Kind == ir.OpSend || op.Kind == ir.OpWrite) && n > 0 && n <= int64(c.p.Target.MaxInline)
		if inline := w.Flags&ir.Inline != 0; inline != (op.Inline || (small && !c.p.Target.PrePost)) {
			c.errorf(op.Pos, "%s: inline flag is %v, want %v (source inline %v, %d bytes, target %s)", g.OpString(ir.OpID(id)),
				inline, !inline, op.Inline, n, c.p.Target.Name)
		}
	}
	for r := range c.p.Ranks {
		rp := &c.p.Ranks[r]
		sig := make([]uint32, len(rp.CQs))
		for q := range rp.Queues {
			wq := &rp.Queues[q]
			n := uint32(0)
			for i := range wq.Chain {
				e := &wq.Chain[i]
				if e.Opcode == ir.OpcHost {
					continue
				}
				n++
				if e.Opcode == ir.OpcRecv && e.Flags&ir.Signalled == 0 {
					c.errorf(c.opOf(e).Pos, "%s: receives always complete with a CQE and must be marked signalled", c.name(entry{r, q, i}))
				}
				if e.Flags&ir.Signalled != 0 {
					if wq.CQ < 0 {
						c.errorf(c.opOf(e).Pos, "%s is signalled but its queue has no CQ", c.name(entry{r, q, i}))
						continue
					}
					sig[wq.CQ]++
				}
			}
			if n != wq.PerIteration {
				c.errorf(diag.InFile(c.g.File), "rank %d %s: PerIteration %d, but the chain posts %d", r, wq.Name, wq.PerIteration, n)
			}
			if wq.CQ >= len(rp.CQs) {
				c.errorf(diag.InFile(c.g.File), "rank %d %s: CQ %d out of range", r, wq.Name, wq.CQ)
			} else if wq.CQ >= 0 && rp.CQs[wq.CQ].Queue != q {
				c.errorf(diag.InFile(c.g.File), "rank %d: CQ %s serves another queue than %s; one CQ per queue keeps counts exact", r, rp.CQs[wq.CQ].Name, wq.Name)
			}
			if wq.Managed && wq.Kind != ir.SendQueue && wq.Kind != ir.RecvQueue {
				c.errorf(diag.InFile(c.g.File), "rank %d %s: only data queues may be managed", r, wq.Name)
			}
		}
		for ci := range rp.CQs {
			if sig[ci] != rp.CQs[ci].PerIteration {
				c.errorf(diag.InFile(c.g.File), "rank %d CQ %s: PerIteration %d, but its queue signals %d", r, rp.CQs[ci].Name, rp.CQs[ci].PerIteration, sig[ci])
			}
		}
	}
}

// expect is what a graph op must lower to.
func expect(op *ir.Op) (ir.Opcode, ir.Slice, ir.Slice) {
	switch op.Kind {
	case ir.OpSend:
		return ir.OpcSend, op.Src, ir.NoSlice
	case ir.OpRecv:
		return ir.OpcRecv, op.Dst, ir.NoSlice
	case ir.OpWrite:
		if op.Notify {
			return ir.OpcWriteImm, op.Src, op.Dst
		}
		return ir.OpcWrite, op.Src, op.Dst
	case ir.OpRead:
		return ir.OpcRead, op.Dst, op.Src
	case ir.OpAtomicAdd:
		return ir.OpcAtomicFAdd, op.Fetch(), op.Dst
	case ir.OpAtomicCAS:
		return ir.OpcAtomicCAS, op.Fetch(), op.Dst
	}
	return ir.OpcHost, ir.NoSlice, ir.NoSlice
}

// signalledNth returns the chain index of the n-th (1-based) signalled posted entry of queue q
// of rank r, or -1.
func (c *checker) signalledNth(r, q int, n uint32) int {
	if sig := c.signalled[r][q]; n >= 1 && uint64(n) <= uint64(len(sig)) {
		return int(sig[n-1])
	}
	return -1
}

// messages pairs message-consuming sends (SEND, RDMA_WRITE_IMM) with the peer's RECVs, k-th with
// k-th per connection, from the chains and the graph's queue pairing.
func (c *checker) messages() (pairs [][2]entry) {
	g := c.g
	for r := range c.p.Ranks {
		rp := &c.p.Ranks[r]
		for q := range rp.Queues {
			wq := &rp.Queues[q]
			if wq.Kind != ir.SendQueue {
				continue
			}
			peerQ := g.Queues[wq.Queue].Peer
			pr := g.Queues[peerQ].Rank
			var recvs []entry
			for pq := range c.p.Ranks[pr].Queues {
				pw := &c.p.Ranks[pr].Queues[pq]
				if pw.Kind == ir.RecvQueue && pw.Queue == peerQ {
					for i := range pw.Chain {
						if pw.Chain[i].Opcode == ir.OpcRecv {
							recvs = append(recvs, entry{pr, pq, i})
						}
					}
				}
			}
			k := 0
			for i := range wq.Chain {
				o := wq.Chain[i].Opcode
				if o != ir.OpcSend && o != ir.OpcWriteImm {
					continue
				}
				if k >= len(recvs) {
					c.errorf(c.opOf(&wq.Chain[i]).Pos, "%s has no matching RECV on rank %d", c.name(entry{r, q, i}), pr)
					break
				}
				s := entry{r, q, i}
				pairs = append(pairs, [2]entry{s, recvs[k]})
				if m := g.Ops[c.at(s).Op].Match; m != ir.None && m != c.at(recvs[k]).Op {
					c.errorf(c.opOf(&wq.Chain[i]).Pos, "%s meets %s, but the graph matches it with %s", c.name(s), c.name(recvs[k]), g.Ops[m].Name)
				}
				k++
			}
		}
	}
	return pairs
}

func joinStrings(s []string) string {
	sort.Strings(s)
	return strings.Join(s, "; ")
}
