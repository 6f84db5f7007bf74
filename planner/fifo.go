package planner

import (
	"fmt"
	"strings"

	"github.com/coredag/coredag/diag"
)

// checkFIFO finds deadlocks that come from queue order and send/recv matching rather than from
// `after` edges alone (those are cycles, reported earlier). First the direct form: `a after b`
// with a and b on one side of one queue and b posted later, which can never run because the side
// is FIFO. Then, if there is none, every remaining loop of waits in the happens-before graph:
// within a rank (through queue order) or across ranks (a send lands only after its peer posted the
// matching recv; a recv completes only when the send lands). It returns the happens-before graph
// so later checks can reuse it.
func checkFIFO(g *Graph) (diag.List, *hbGraph) {
	if errs := checkQueueOrder(g); len(errs) > 0 {
		return errs, nil
	}
	h := newHB(g, true)
	if h.acyclic {
		return nil, h
	}
	// Loops within one rank first: a loop across ranks often only exists because of them.
	if local := newHB(g, false); !local.acyclic {
		return deadlockLoops(g, local), nil
	}
	return deadlockLoops(g, h), nil
}

// checkQueueOrder reports `a after b` where a and b share a queue side and b comes later.
func checkQueueOrder(g *Graph) diag.List {
	var groups reportGroups
	for _, e := range g.Edges {
		from, to := &g.Ops[e.From], &g.Ops[e.To]
		if from.Queue == None || from.Queue != to.Queue || from.Kind.IsRecvSide() != to.Kind.IsRecvSide() || from.Index <= to.Index {
			continue
		}
		q := &g.Queues[from.Queue]
		side := "send"
		if from.Kind.IsRecvSide() {
			side = "receive"
		}
		groups.add(e.Pos.String(), []int{from.Rank}, func(ranks string) *diag.Diagnostic {
			return &diag.Diagnostic{Code: diag.Deadlock, Pos: e.Pos, Msg: fmt.Sprintf(
				"%s after %s on %s: both are on the %s side of queue %q, where %s (%s) is posted after %s (%s); "+
					"a queue side is FIFO, so %s can never start and this deadlocks "+
					"(declare %s before %s, put one of them on another queue, or drop this `after`)",
				to.Name, from.Name, ranks, side, q.Name, from.Name, from.Pos, to.Name, to.Pos,
				to.Name, from.Name, to.Name)}
		})
	}
	return groups.errors()
}

// deadlockLoops reports one shortest loop per strongly connected component of the cyclic
// happens-before graph h.
func deadlockLoops(g *Graph, h *hbGraph) diag.List {
	comp, cyclic := sccs(h.n, h.succs)
	roots := cycleRoots(comp, cyclic)
	pos := edgePositions(g)
	finder := newCycleFinder(h.n)
	var groups reportGroups
	for _, root := range roots {
		cyc := finder.shortest(root, comp, h.succs)
		loop := describeLoop(g, cyc, pos)
		if len(loop.steps) == 0 {
			continue
		}
		groups.add(loop.key, loop.ranks, func(ranks string) *diag.Diagnostic {
			var msg string
			if loop.crossRank {
				msg = fmt.Sprintf("deadlock: a loop of waits through send/recv matching on %s: %s; "+
					"nothing on this loop can complete (post each recv before the ops its sender waits for, "+
					"or drop one of the `after` edges on the loop)", ranks, listSteps(loop.steps))
			} else {
				msg = fmt.Sprintf("deadlock on %s: a loop of waits through queue order: %s; "+
					"a queue side is FIFO, so nothing on this loop can start "+
					"(reorder the ops on that queue, move one to another queue, or drop one of the `after` edges)",
					ranks, listSteps(loop.steps))
			}
			return &diag.Diagnostic{Code: diag.Deadlock, Pos: loop.pos, Msg: msg}
		})
	}
	return groups.errors()
}

// loop is a deadlock cycle of events told as steps a person can follow.
type loop struct {
	steps     []string
	key       string // positions along the loop: equal for the same mistake on other ranks
	ranks     []int
	pos       diag.Pos // the first `after` on the loop in source order, else the first op
	crossRank bool     // the loop goes through send/recv matching
}

// describeLoop turns a cycle of events into steps. Edges inside one op (start, landing, end) say
// nothing new and are left out.
func describeLoop(g *Graph, cyc []int32, pos map[uint64]diag.Pos) loop {
	var l loop
	type step struct {
		text string
		pos  diag.Pos
		edge bool // pos is an `after` clause
	}
	var steps []step
	rankSeen := map[int]bool{}
	k := len(cyc)
	for i := 0; i < k; i++ {
		u, v := event(cyc[i]), event(cyc[(i+1)%k])
		a, b := u.op(), v.op()
		for _, o := range []OpID{a, b} {
			if r := g.Ops[o].Rank; !rankSeen[r] {
				rankSeen[r] = true
				l.ranks = append(l.ranks, r)
			}
		}
		if a == b {
			continue
		}
		opA, opB := &g.Ops[a], &g.Ops[b]
		var s step
		switch {
		case u.phase() == evEnd && v.phase() == evStart:
			p := pos[edgeKey(int32(a), int32(b))]
			s = step{fmt.Sprintf("%s waits for %s (`after` at %s)", g.OpString(b), opA.Name, p), p, true}
		case u.phase() == evStart && v.phase() == evStart:
			s = step{fmt.Sprintf("%s is posted after %s on queue %q", g.OpString(b), opA.Name, g.Queues[opA.Queue].Name), opB.Pos, false}
		case u.phase() == evEnd && v.phase() == evEnd:
			s = step{fmt.Sprintf("%s completes after %s on queue %q", g.OpString(b), opA.Name, g.Queues[opA.Queue].Name), opB.Pos, false}
		case u.phase() == evStart && v.phase() == evLand:
			l.crossRank = true
			s = step{fmt.Sprintf("%s (%s) lands only after %s posted its matching recv %s (%s)",
				g.OpString(b), opB.Pos, rankName(opA.Rank), opA.Name, opA.Pos), opB.Pos, false}
		case u.phase() == evLand && v.phase() == evEnd:
			l.crossRank = true
			s = step{fmt.Sprintf("%s (%s) completes only when its matching %s %s lands",
				g.OpString(b), opB.Pos, opA.Kind, g.OpString(a)), opB.Pos, false}
		default:
			continue
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		return l
	}
	// Start at the `after` written first (or the first op), so every rank's instance of the same
	// mistake reads the same and groups under one key.
	first := 0
	for i, s := range steps {
		f := steps[first]
		if s.edge && !f.edge || s.edge == f.edge && s.pos.Before(f.pos) {
			first = i
		}
	}
	steps = append(steps[first:], steps[:first]...)
	l.pos = steps[0].pos
	var key []string
	for _, s := range steps {
		l.steps = append(l.steps, s.text)
		key = append(key, s.pos.String())
	}
	l.key = strings.Join(key, " ")
	return l
}

func rankName(r int) string { return fmt.Sprintf("rank %d", r) }
