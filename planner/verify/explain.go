package verify

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// FixPlan is a set of `after` edges that, added together, make a plan race-free: the same edge
// needed on several ranks is one entry with those ranks.
type FixPlan struct {
	Edges    []FixEdge
	Complete bool // false when some race had no fix, or the rounds ran out
}

// FixEdge is one missing ordering: `Op after After` on every rank in Ranks.
type FixEdge struct {
	Op, After string // op names as the plan spells them on those ranks, e.g. "rx[1]", "red[0]"
	Ranks     []int
	Races     int // how many races of the plan this edge settles (counted when it was chosen)
}

// String formats the edge as the statement to add: "rx[1] after red[0]   # on ranks 0-3".
func (e FixEdge) String() string {
	return fmt.Sprintf("%s after %s   # on %s", e.Op, e.After, diag.FormatRanks(e.Ranks))
}

// SuggestFixes finds a small set of `after` edges that makes g race-free: it takes the fix
// ExplainRaces proposes for each race, adds them all, and repeats on the amended graph (a fix
// may expose a race that the removed one hid) for at most a few rounds. g is not modified.
func SuggestFixes(g *ir.Graph) FixPlan {
	work := g
	type key struct {
		op, after string
	}
	byKey := map[key]*FixEdge{}
	var order []key
	plan := FixPlan{Complete: true}
	for round := 0; round < 4; round++ {
		races := Races(work)
		if len(races) == 0 {
			break
		}
		if round == 3 {
			plan.Complete = false
			break
		}
		fixes, ok := ExplainRaces(work, races)
		added := map[Fix]bool{}
		edges := slices.Clone(work.Edges)
		for i, f := range fixes {
			if !ok[i] {
				plan.Complete = false
				continue
			}
			k := key{work.Ops[f.Op].Name, work.Ops[f.After].Name}
			fe := byKey[k]
			if fe == nil {
				fe = &FixEdge{Op: k.op, After: k.after}
				byKey[k] = fe
				order = append(order, k)
			}
			fe.Races++
			if !added[f] {
				added[f] = true
				fe.Ranks = append(fe.Ranks, f.Rank)
				edges = append(edges, ir.Edge{From: f.After, To: f.Op, Pos: work.Ops[f.Op].Pos})
			}
		}
		if len(added) == 0 {
			plan.Complete = false
			break
		}
		work = g.WithEdges(edges)
	}
	for _, k := range order {
		fe := byKey[k]
		sort.Ints(fe.Ranks)
		plan.Edges = append(plan.Edges, *fe)
	}
	if plan.Complete {
		plan.Edges = prune(g, plan.Edges)
	}
	return plan
}

// prune drops suggested edges that the others already imply (rx[1] after rx[0] is redundant
// next to rx[1] after red[0] when red[0] is after rx[0]): each is removed in turn, last first,
// and kept out if the plan stays race-free without it.
func prune(g *ir.Graph, edges []FixEdge) []FixEdge {
	if len(edges) > 16 { // each trial re-verifies the plan: keep explaining cheap
		return edges
	}
	keep := make([]bool, len(edges))
	for i := range keep {
		keep[i] = true
	}
	for i := len(edges) - 1; i >= 0; i-- {
		keep[i] = false
		if len(Races(withEdges(g, edges, keep))) > 0 {
			keep[i] = true
		}
	}
	var out []FixEdge
	for i, e := range edges {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out
}

// withEdges returns a copy of g with the kept suggested edges added on their ranks.
func withEdges(g *ir.Graph, fixes []FixEdge, keep []bool) *ir.Graph {
	edges := slices.Clone(g.Edges)
	for i, e := range fixes {
		if !keep[i] {
			continue
		}
		for _, r := range e.Ranks {
			op, after := opNamed(g, r, e.Op), opNamed(g, r, e.After)
			if op != ir.None && after != ir.None {
				edges = append(edges, ir.Edge{From: after, To: op, Pos: g.Ops[op].Pos})
			}
		}
	}
	return g.WithEdges(edges)
}

// opNamed finds rank r's op called name, or None.
func opNamed(g *ir.Graph, r int, name string) ir.OpID {
	first, end := g.RankOps(r)
	for id := first; id < end; id++ {
		if g.Ops[id].Name == name {
			return id
		}
	}
	return ir.None
}

// String lists the edges, one per line.
func (p FixPlan) String() string {
	var b strings.Builder
	for _, e := range p.Edges {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}
