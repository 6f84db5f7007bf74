package lower

import (
	"math/bits"
	"slices"

	"github.com/coredag/coredag/diag"
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

// signalRank chooses the signalling of rank r's chains, counts their completions, gives every
// WAIT its count and sizes the management, host and completion queues.
func (c *compiler) signalRank(r int, sc *scratch) {
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
				(e.Opcode.IsData() && sc.waited[e.Op-sc.first]) || c.t.Trigger != nil
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
	total := 0
	for wi := range rp.Queues {
		total += len(rp.Queues[wi].Chain)
	}
	flat := reuse(&sc.count, total)
	count := make([][]uint32, len(rp.Queues))
	for wi := range rp.Queues {
		q := &rp.Queues[wi]
		count[wi], flat = flat[:len(q.Chain)], flat[len(q.Chain):]
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
		l := sc.loc[x-sc.first]
		idx := l.Index
		if !c.g.Ops[x].Kind.OnQueue() {
			idx++ // the NOP that follows the HOST entry
		}
		return ir.Cond{Cond: wait.Cond{CQ: int32(rp.Queues[l.Queue].CQ), Count: count[l.Queue][idx]}, Op: x}
	}
	for wi := range rp.Queues {
		for k := range rp.Queues[wi].Chain {
			e := &rp.Queues[wi].Chain[k]
			switch e.Opcode {
			case ir.OpcWait:
				if e.Wait.CQ >= 0 { // opens a piece of a management chain (splitMgmt): awaits all of the piece before
					prev := rp.CQs[e.Wait.CQ].Queue
					e.Wait.Count = count[prev][len(count[prev])-1]
					continue
				}
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

func ceilPow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// checkRankLimits records rank r's chains that do not fit the target: pre-posted chains longer than their
// queue's depth, queues or CQs above the hardware maxima, and per-iteration counts too large
// for the cyclic 16- and 24-bit indices. A limit broken on many ranks is one diagnostic
// (diag.Group); for a chain longer than its depth it is worded with the largest need.
func (c *compiler) checkRankLimits(r int, found *limitFinds) {
	add := found.add
	planPos := diag.InFile(c.g.File)
	rp := &c.plan.Ranks[r]
	for wi := range rp.Queues {
		q := &rp.Queues[wi]
		n := int(q.PerIteration)
		pos := planPos
		if q.Queue != ir.None {
			pos = c.g.Queues[q.Queue].Pos
		}
		if err := wait.WQ.Check(uint64(n)); err != nil {
			add(r, n, pos, "work queue %s: %v (split the plan's work over more queues)", q.Name, err)
			continue
		}
		switch {
		case q.Queue != ir.None && c.t.PrePost && n > q.Depth:
			add(r, n, pos, "%s: one iteration posts %d WQEs on its %s side but its depth is %d, and target %s posts whole chains before it runs (declare `depth %d` or more on the queue, or compile for --target generic)",
				q.Name, n, q.Kind, q.Depth, c.t.Name, n) // depth n fits: the least that works
		case q.Queue == ir.None && q.Depth > c.t.MaxWQDepth:
			add(r, n, pos, "%s queue needs %d WQEs per iteration, above the %d target %s supports (split the plan)", q.Kind, n, c.t.MaxWQDepth, c.t.Name)
		}
	}
	for ci := range rp.CQs {
		cq := &rp.CQs[ci]
		if err := wait.CQ.Check(uint64(cq.PerIteration)); err != nil {
			add(r, int(cq.PerIteration), planPos, "CQ %s: %v", cq.Name, err)
		} else if cq.Depth > c.t.MaxCQDepth {
			add(r, cq.Depth, planPos, "CQ %s needs %d entries, above the %d target %s supports (split the plan)", cq.Name, cq.Depth, c.t.MaxCQDepth, c.t.Name)
		}
	}
}

// addLimitErrors adds the limits found broken over all ranks to the errors, a limit broken on
// many ranks as one diagnostic.
func (c *compiler) addLimitErrors(found limitFinds) {
	var group diag.Group
	found.addTo(&group)
	c.errs = append(c.errs, group.List(len(c.plan.Ranks))...)
}

// limitFinds collects the instances of the target limits a plan breaks, each found on one rank,
// so that a mistake made on many ranks is one diagnostic, worded with its largest need.
type limitFinds []limitFind

type limitFind struct {
	d    *diag.Diagnostic
	kind string // the format of its message: the check that failed
	rank int
	need int // for ordering: the largest need of a mistake is the one reported
}

// add records an instance found on rank, code target, worded by format.
func (f *limitFinds) add(rank, need int, pos diag.Pos, format string, args ...any) {
	*f = append(*f, limitFind{diag.Errorf(diag.Target, pos, format, args...), format, rank, need})
}

// addTo adds the instances to group, the largest need first, so it is the instance each
// mistake is worded with.
func (f limitFinds) addTo(group *diag.Group) {
	slices.SortStableFunc(f, func(a, b limitFind) int { return b.need - a.need })
	for _, x := range f {
		group.Add(x.d, x.kind, x.rank)
	}
}

// addStats adds the WQE counts of s (those RankStats gives) to dst.
func addStats(dst *ir.Stats, s ir.Stats) {
	dst.WQEs += s.WQEs
	dst.DataWQEs += s.DataWQEs
	dst.HostSteps += s.HostSteps
	dst.HostWaits += s.HostWaits
	dst.Waits += s.Waits
	dst.Enables += s.Enables
	dst.Fences += s.Fences
	dst.Signalled += s.Signalled
}
