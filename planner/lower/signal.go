package lower

import (
	"math/bits"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/wait"
)

// Selective signalling, completion counts, queue sizing and limits.
//
// A posted WQE is signalled when something observes its completion (a WAIT, a HOST step, or on
// the generic target the polling engine resolving a successor on another queue), when it ends
// its queue's chain for the iteration (so the engine sees the iteration finish and every slot
// is reclaimed), or when half a queue's depth of unsignalled WQEs precede it (so a send queue
// never fills with entries whose slots cannot be reclaimed). Receives always complete with a
// CQE, and the NOPs of the host-signal queue exist to be waited on.

func (c *compiler) signal() {
	for r := range c.plan.Ranks {
		rp := &c.plan.Ranks[r]
		for wi := range rp.Queues {
			q := &rp.Queues[wi]
			posted := 0
			last := -1
			for k := range q.Chain {
				if q.Chain[k].Opcode.Posted() {
					posted++
					last = k
				}
			}
			q.PerIteration = uint32(posted)
			if q.Kind == ir.MgmtQueue || q.Kind == ir.HostSignalQueue {
				q.Depth = ceilPow2(posted)
			}
			// Pre-posted chains fit their queue (checkLimits) and end signalled, so slots are
			// reclaimed at the end of the iteration; incrementally posted ones must signal often.
			half := int(^uint(0) >> 1)
			if !c.t.PrePost {
				half = max(1, q.Depth/2)
			}
			run := 0
			for k := range q.Chain {
				e := &q.Chain[k]
				if !e.Opcode.Posted() {
					continue
				}
				sig := e.Opcode == ir.OpcRecv || e.Opcode == ir.OpcNop || k == last || run+1 >= half ||
					(e.Opcode.IsData() && c.waited[e.Op]) || c.t.Trigger != nil
				if sig {
					e.Flags |= ir.Signalled
					run = 0
				} else {
					e.Flags &^= ir.Signalled
					run++
				}
			}
		}
		// Cumulative signalled counts per work queue give every WAIT its absolute count.
		count := make([][]uint32, len(rp.Queues))
		for wi := range rp.Queues {
			q := &rp.Queues[wi]
			count[wi] = make([]uint32, len(q.Chain))
			n := uint32(0)
			for k := range q.Chain {
				if q.Chain[k].Completes() {
					n++
				}
				count[wi][k] = n
			}
			if q.CQ >= 0 {
				rp.CQs[q.CQ].PerIteration = n
			}
		}
		cond := func(x ir.OpID) ir.Cond {
			l := c.plan.Loc[x]
			idx := l.Index
			if !c.g.Ops[x].Kind.OnQueue() {
				idx++ // the NOP that follows the HOST entry
			}
			return ir.Cond{CQ: rp.Queues[l.Queue].CQ, Count: count[l.Queue][idx], Op: x}
		}
		for wi := range rp.Queues {
			for k := range rp.Queues[wi].Chain {
				e := &rp.Queues[wi].Chain[k]
				switch e.Opcode {
				case ir.OpcWait:
					e.Wait = cond(e.Wait.Op)
				case ir.OpcHost:
					for i := range e.Waits {
						e.Waits[i] = cond(e.Waits[i].Op)
					}
				}
			}
		}
		for ci := range rp.CQs {
			cq := &rp.CQs[ci]
			q := &rp.Queues[cq.Queue]
			if c.t.PrePost {
				cq.Depth = ceilPow2(int(cq.PerIteration))
			} else {
				cq.Depth = ceilPow2(q.Depth)
			}
		}
	}
}

func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// checkLimits reports chains that do not fit the target: pre-posted chains longer than their
// queue's depth, queues or CQs above the hardware maxima, and per-iteration counts too large
// for the cyclic 16- and 24-bit indices. A limit broken on many ranks is reported once per
// declaration, with the largest need.
func (c *compiler) checkLimits() {
	type key struct {
		pos  diag.Pos
		side string
	}
	type need struct {
		n, depth, rank, ranks int
		name                  string
	}
	worst := map[key]*need{}
	var keys []key
	note := func(k key, n, depth, rank int, name string) {
		w, ok := worst[k]
		if !ok {
			w = &need{}
			worst[k] = w
			keys = append(keys, k)
		}
		w.ranks++
		if n > w.n {
			w.n, w.depth, w.rank, w.name = n, depth, rank, name
		}
	}
	planPos := diag.InFile(c.g.File)
	for r := range c.plan.Ranks {
		rp := &c.plan.Ranks[r]
		for wi := range rp.Queues {
			q := &rp.Queues[wi]
			n := int(q.PerIteration)
			var pos diag.Pos
			if q.Queue != ir.None {
				pos = c.g.Queues[q.Queue].Pos
			} else {
				pos = planPos
			}
			if err := wait.WQ.Check(uint64(n)); err != nil {
				c.errs.Add(diag.Target, pos, "work queue %s on rank %d: %v (split the plan's work over more queues)", q.Name, r, err)
				continue
			}
			switch {
			case q.Queue != ir.None && c.t.PrePost && n > q.Depth:
				note(key{pos, q.Kind.String()}, n, q.Depth, r, q.Name)
			case q.Queue == ir.None && q.Depth > c.t.MaxWQDepth:
				c.errs.Add(diag.Target, pos, "%s queue on rank %d needs %d WQEs per iteration, above the %d target %s supports (split the plan)", q.Kind, r, n, c.t.MaxWQDepth, c.t.Name)
			}
		}
		for ci := range rp.CQs {
			cq := &rp.CQs[ci]
			if err := wait.CQ.Check(uint64(cq.PerIteration)); err != nil {
				c.errs.Add(diag.Target, planPos, "CQ %s on rank %d: %v", cq.Name, r, err)
			} else if cq.Depth > c.t.MaxCQDepth {
				c.errs.Add(diag.Target, planPos, "CQ %s on rank %d needs %d entries, above the %d target %s supports (split the plan)", cq.Name, r, cq.Depth, c.t.MaxCQDepth, c.t.Name)
			}
		}
	}
	for _, k := range keys {
		w := worst[k]
		others := ""
		if w.ranks > 1 {
			others = " (and on " + english.Plural(w.ranks-1, "other rank") + ")"
		}
		c.errs.Add(diag.Target, k.pos, "%s on rank %d%s: one iteration posts %d WQEs on its %s side but its depth is %d, and target %s posts whole chains before it runs (declare `depth %d` or more on the queue, or compile for --target generic)",
			w.name, w.rank, others, w.n, k.side, w.depth, c.t.Name, ceilPow2(w.n))
	}
}

// stats fills Plan.Stats from the per-rank counts (CriticalPath is set earlier).
func (c *compiler) stats() {
	s := &c.plan.Stats
	for r := range c.plan.Ranks {
		rs := c.plan.RankStats(r)
		s.WQEs += rs.WQEs
		s.DataWQEs += rs.DataWQEs
		s.HostSteps += rs.HostSteps
		s.HostWaits += rs.HostWaits
		s.Waits += rs.Waits
		s.Enables += rs.Enables
		s.Fences += rs.Fences
		s.Signalled += rs.Signalled
	}
	s.NaiveWaits, s.NaiveEnables = c.naiveWaits, c.naiveEnables
}
