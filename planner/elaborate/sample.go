package elaborate

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate/internal/arena"
)

// Sample is a plan elaborated for some of its ranks only, at its full world size: what a model
// of a symmetric plan needs when the plan has too many ops to elaborate whole (a ring of 16,384
// ranks has about 1.3 billion).
type Sample struct {
	// Graph holds the sampled ranks' ops, queues and `after` edges, rank after rank in the
	// order of Ranks; Graph.Ranks is the world size, and Graph.Rank spans the ops and queues of
	// every rank (empty for the ranks not sampled). Only the checks within a rank ran: queues
	// are not paired (Peer is ir.None), messages are not matched, and the Graph is not frozen.
	Graph *ir.Graph
	// Ranks are the ranks elaborated, ascending.
	Ranks []int
	// PeerNames holds, for each queue of Graph, the name of the queue it pairs with on its
	// PeerRank (the queue's own name unless its declaration says `peer`).
	PeerNames []string
}

// ElaborateRanks elaborates f for the given ranks only (in ascending order, each once), with
// the world size and every other param as Elaborate has them. Each rank is elaborated as
// Elaborate elaborates it, with the checks of one rank (names, shapes, bounds) and the global
// ones (params, buffers, inits, expects); the checks between ranks (queue pairing, message
// matching) are the caller's, on the ranks it has. The error is one Elaborate would return, or
// says that a rank is outside the world.
func ElaborateRanks(ctx context.Context, f *dsl.File, params map[string]int64, ranks []int, opt Options) (*Sample, error) {
	if len(ranks) == 0 {
		return nil, fmt.Errorf("elaborate: no rank to elaborate")
	}
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	el := newElaborator(ctx, f, params, opt)
	el.only, el.outside = slices.Compact(rs), -1
	el.run()
	el.globals.m = nil
	if err := el.result(); err != nil {
		return nil, err
	}
	if el.outside >= 0 {
		return nil, fmt.Errorf("elaborate: rank %d is not a rank of the plan: its ranks are 0 to %d", el.only[el.outside], el.g.Ranks-1)
	}
	names := make([]string, len(el.peerRefs))
	for i, r := range el.peerRefs {
		names[i] = r.name
	}
	return &Sample{Graph: el.g, Ranks: el.only, PeerNames: names}, nil
}

// runOnly elaborates the ranks of el.only, one after the other, after the header, and gives
// every other rank an empty span where the next rank's ops start.
func (el *elaborator) runOnly() {
	g := el.g
	el.outside = -1
	for i, r := range el.only {
		if r < 0 || r >= g.Ranks {
			el.outside = i
			return
		}
	}
	for i, r := range el.only {
		if el.truncated || el.stopCancelled() {
			return
		}
		el.first, el.end = r, r+1 // the Graph's arrays grow for this rank alone (growOps) ...
		el.elaborateRank(r)
		if i == 0 && len(el.only) > 1 && !el.truncated { // ... but for all of them, when the first is done
			k := len(el.only)
			want := min(len(g.Ops)*k, el.maxOps)
			if !el.room(heldOps, diag.Pos{}, want, unsafe.Sizeof(ir.Op{}), "ops") {
				return
			}
			g.Ops = arena.GrowTo(g.Ops, want)
			if !el.room(heldQueues, diag.Pos{}, len(g.Queues)*k, unsafe.Sizeof(ir.Queue{}), "queues") {
				return
			}
			g.Queues = arena.GrowTo(g.Queues, len(g.Queues)*k)
			if !el.room(heldEdges, diag.Pos{}, len(g.Edges)*k, unsafe.Sizeof(ir.Edge{}), "`after` edges") {
				return
			}
			g.Edges = arena.GrowTo(g.Edges, len(g.Edges)*k)
		}
	}
	var at ir.RankSpan
	k := 0
	for r := range g.Rank {
		if k < len(el.only) && el.only[k] == r {
			k++
			at = ir.RankSpan{FirstOp: g.Rank[r].EndOp, EndOp: g.Rank[r].EndOp, FirstQueue: g.Rank[r].EndQueue, EndQueue: g.Rank[r].EndQueue}
			continue
		}
		g.Rank[r] = at
	}
}
