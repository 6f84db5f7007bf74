package verify

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// checkFIFO finds deadlocks that come from queue order and send/recv matching rather than from
// `after` edges alone (those are cycles, reported earlier), given g's cyclic happens-before graph
// h. First the direct form: `a after b` with a and b on one side of one queue and b posted later,
// which can never run because the side is FIFO. Then, if there is none, every remaining loop of
// waits in h: within a rank (through queue order) or across ranks (a send lands only after its
// peer posted the matching recv; a recv completes only when the send lands). Stopped (ctx), it
// returns what it found so far.
func checkFIFO(ctx context.Context, g *ir.Graph, h *hbGraph) diag.List {
	if errs := checkQueueOrder(g); len(errs) > 0 {
		return errs
	}
	// Loops within one rank first: a loop across ranks often only exists because of them.
	if local := newHB(ctx, g, false, h.opt); !local.acyclic {
		if stop.Cause(ctx) != nil { // not built whole
			return nil
		}
		return deadlockLoops(ctx, g, local)
	}
	return deadlockLoops(ctx, g, h)
}

// checkQueueOrder reports `a after b` where a and b share a queue side and b comes later.
func checkQueueOrder(g *ir.Graph) diag.List {
	var groups diag.Group
	for _, e := range g.Edges {
		from, to := &g.Ops[e.From], &g.Ops[e.To]
		if from.Queue == ir.None || from.Queue != to.Queue || from.Kind.IsRecvSide() != to.Kind.IsRecvSide() || from.Index <= to.Index {
			continue
		}
		q := &g.Queues[from.Queue]
		side := "send"
		if from.Kind.IsRecvSide() {
			side = "receive"
		}
		d := diag.Errorf(diag.Deadlock, e.Pos,
			"%s after %s: both are on the %s side of queue %q, where %s is posted after %s; "+
				"a queue side is FIFO, so %s can never start and this deadlocks "+
				"(declare %s before %s, put one of them on another queue, or drop this `after`)",
			to.Name, from.Name, side, q.Name, from.Name, to.Name, to.Name, from.Name, to.Name)
		d.Relate(to.Pos, fmt.Sprintf("%s is posted first", to.Name))
		d.Relate(from.Pos, fmt.Sprintf("%s is posted after it", from.Name))
		groups.Add(d, "queue order", int(from.Rank))
	}
	return groups.List(g.Ranks)
}

// deadlockLoops reports one shortest loop per strongly connected component of the cyclic
// happens-before graph h, until ctx is cancelled.
func deadlockLoops(ctx context.Context, g *ir.Graph, h *hbGraph) diag.List {
	comp, cyclic := sccs(h.n, h.succs)
	roots := cycleRoots(comp, cyclic)
	pos := edgePositions(g)
	finder := newCycleFinder(h.n)
	var groups diag.Group
	for _, root := range roots {
		if stop.Cause(ctx) != nil {
			break
		}
		cyc := finder.shortest(root, comp, h.succs)
		loop := describeLoop(g, cyc, pos)
		if len(loop.steps) == 0 {
			continue
		}
		var d *diag.Diagnostic
		if loop.crossRank {
			d = diag.Errorf(diag.Deadlock, loop.steps[0].pos, "deadlock: a loop of waits through send/recv matching: %s; "+
				"nothing on this loop can complete (post each recv before the ops its sender waits for, "+
				"or drop one of the `after` edges on the loop)", listSteps(loop.steps))
		} else {
			d = diag.Errorf(diag.Deadlock, loop.steps[0].pos, "deadlock: a loop of waits through queue order: %s; "+
				"a queue side is FIFO, so nothing on this loop can start "+
				"(reorder the ops on that queue, move one to another queue, or drop one of the `after` edges)",
				listSteps(loop.steps))
		}
		d.Related = relatedSteps(loop.steps)
		kind := "deadlock in a rank"
		if loop.crossRank {
			kind = "deadlock across ranks"
		}
		groups.Add(d, kind, loop.ranks...)
	}
	return groups.List(g.Ranks)
}

// loop is a deadlock cycle of events told as steps a person can follow, starting at the first
// `after` on the loop in source order (else the first op).
type loop struct {
	steps     []step
	ranks     []int
	crossRank bool // the loop goes through send/recv matching
}

// describeLoop turns a cycle of events into steps. Edges inside one op (start, landing, end) say
// nothing new and are left out.
func describeLoop(g *ir.Graph, cyc []int32, pos map[uint64]diag.Pos) loop {
	var l loop
	type edgeStep struct {
		step
		edge bool // pos is an `after` clause
	}
	var steps []edgeStep
	rankSeen := map[int]bool{}
	k := len(cyc)
	for i := 0; i < k; i++ {
		u, v := event(cyc[i]), event(cyc[(i+1)%k])
		a, b := u.op(), v.op()
		for _, o := range []ir.OpID{a, b} {
			if r := int(g.Ops[o].Rank); !rankSeen[r] {
				rankSeen[r] = true
				l.ranks = append(l.ranks, r)
			}
		}
		if a == b {
			continue
		}
		opA, opB := &g.Ops[a], &g.Ops[b]
		var s edgeStep
		switch {
		case u.phase() == evEnd && v.phase() == evStart:
			s = edgeStep{step{fmt.Sprintf("%s waits for %s", g.OpString(b), opA.Name), pos[edgeKey(int32(a), int32(b))]}, true}
		case u.phase() == evStart && v.phase() == evStart:
			s = edgeStep{step{fmt.Sprintf("%s is posted after %s on queue %q", g.OpString(b), opA.Name, g.Queues[opA.Queue].Name), opB.Pos}, false}
		case u.phase() == evEnd && v.phase() == evEnd:
			s = edgeStep{step{fmt.Sprintf("%s completes after %s on queue %q", g.OpString(b), opA.Name, g.Queues[opA.Queue].Name), opB.Pos}, false}
		case u.phase() == evStart && v.phase() == evLand:
			l.crossRank = true
			s = edgeStep{step{fmt.Sprintf("%s lands only after %s posted its matching recv %s",
				g.OpString(b), rankName(int(opA.Rank)), opA.Name), opB.Pos}, false}
		case u.phase() == evLand && v.phase() == evEnd:
			l.crossRank = true
			s = edgeStep{step{fmt.Sprintf("%s completes only when its matching %s %s lands",
				g.OpString(b), opA.Kind, g.OpString(a)), opB.Pos}, false}
		default:
			continue
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		return l
	}
	// Start at the `after` written first (or the first op), so every rank's instance of the same
	// mistake reads the same and groups as one.
	first := 0
	for i, s := range steps {
		f := steps[first]
		if s.edge && !f.edge || s.edge == f.edge && s.pos.Before(f.pos) {
			first = i
		}
	}
	steps = append(steps[first:], steps[:first]...)
	for _, s := range steps {
		l.steps = append(l.steps, s.step)
	}
	return l
}

func rankName(r int) string { return fmt.Sprintf("rank %d", r) }
