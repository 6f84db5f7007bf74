package verify

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// FixPlan is a set of `after` edges that, added together, make a plan race-free: the same edge
// needed on several ranks is one entry with those ranks. It has been proven: the plan with the
// edges added has no cycle and no deadlock, and has none of the races they were chosen for.
type FixPlan struct {
	Edges    []FixEdge
	Complete bool     // the edges remove every race; false when some have no fix (Unfixed)
	Unfixed  []string // the races no `after` edge fixes, one per pair of op statements and buffer
	// OutOfBudget says the search stopped at Options.FixBudget: the races of Unfixed may have
	// fixes it did not get to.
	OutOfBudget bool
	// Stopped says the search's context ended it: the plan means nothing then.
	Stopped bool
}

// FixEdge is one missing ordering: `Op after After` on every rank in Ranks.
type FixEdge struct {
	Op, After string // op names as the plan spells them on those ranks, e.g. "rx[1]", "red[0]"
	Ranks     []int
}

// String formats the edge as the statement to add: "rx[1] after red[0]   # on ranks 0-3".
func (e FixEdge) String() string {
	return fmt.Sprintf("%s after %s   # on %s", e.Op, e.After, diag.FormatRanks(e.Ranks))
}

// SuggestFixes is the package's Options.SuggestFixes with the zero Options.
func SuggestFixes(ctx context.Context, g *ir.Graph) FixPlan { return Options{}.SuggestFixes(ctx, g) }

// SuggestFixes finds a small set of `after` edges that makes g race-free under opt.Order, and
// proves it: it fixes the races the race pass finds, adds the edges and runs the pass again (a
// fixed race may have hidden another on the same memory), for at most a few rounds; then the
// deadlock and race passes run on the plan with every edge added. g is not modified. Races no
// edge fixes are listed in Unfixed; so are all when the search would spend more than
// opt.FixBudget. Stopped by ctx, it returns a FixPlan with only Stopped set.
func (opt Options) SuggestFixes(ctx context.Context, g *ir.Graph) FixPlan {
	ord := opt.Order & usedOrder(g)
	races, _, ok := racesUnder(ctx, g, ord, &opt)
	if stop.Cause(ctx) != nil {
		return FixPlan{Stopped: true}
	}
	if !ok || len(races) == 0 {
		return FixPlan{Complete: ok}
	}
	s := newFixGraph(ctx, g, ord, &opt)
	if s == nil {
		return FixPlan{Unfixed: unfixedText(g, races, "the plan is too large to prove a fix within the search budget"), OutOfBudget: true}
	}
	var todo []Race
	stuck := map[raceKey]bool{}
	for round := 0; round < 4 && len(races) > 0; round++ {
		fresh := 0
		for _, r := range races {
			if !stuck[keyOf(r)] {
				todo = append(todo, r)
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
		s.setAdded(nil) // every round chooses among all the races so far, so that pruning sees them all
		_, fixed := s.fixRaces(todo)
		if s.spent() {
			break
		}
		kept := todo[:0]
		for i, r := range todo {
			if fixed[i] {
				kept = append(kept, r)
			} else {
				stuck[keyOf(r)] = true
			}
		}
		todo = kept
		if races, _, ok = racesUnder(ctx, withFixes(g, s.added), ord, &opt); !ok {
			break
		}
	}
	fixes := s.added
	left, proven := proveFixes(ctx, g, fixes, nil, ord, &opt)
	if stop.Cause(ctx) != nil {
		return FixPlan{Stopped: true}
	}
	if !proven || s.spent() {
		why := "no `after` edge found fixes them without a deadlock"
		if s.spent() {
			why = "the search for fixes ran out of its budget"
		}
		return FixPlan{Unfixed: unfixedText(g, races, why), OutOfBudget: s.spent()}
	}
	plan := FixPlan{Edges: collapse(g, fixes), Complete: len(left) == 0}
	plan.Unfixed = unfixedText(g, left, "")
	return plan
}

// withFixes returns a copy of g with the edges of fixes added.
func withFixes(g *ir.Graph, fixes []Fix) *ir.Graph {
	edges := slices.Clone(g.Edges)
	for _, f := range fixes {
		edges = append(edges, ir.Edge{From: f.After, To: f.Op, Pos: g.Ops[f.Op].Pos})
	}
	return g.WithEdges(edges)
}

// proveFixes adds fixes to g and runs the passes again: the deadlock checks (cycles, FIFO, loops
// through matching) must pass, and none of races (the races the fixes claim to fix) may be left,
// under the ordering ord. It returns the races the plan still has, and whether the fixes hold.
func proveFixes(ctx context.Context, g *ir.Graph, fixes []Fix, races []Race, ord ir.Order, opt *Options) ([]Race, bool) {
	fixed := withFixes(g, fixes)
	if errs, _ := opt.CheckDeadlocks(ctx, fixed); len(errs) > 0 {
		return nil, false
	}
	left, h, ok := racesUnder(ctx, fixed, ord, opt)
	if !ok {
		return nil, false
	}
	// The race pass reports a race on every piece of memory that has one, not every racing
	// pair: each claimed pair is asked of the graph too.
	claimed := map[raceKey]bool{}
	for _, r := range races {
		claimed[keyOf(r)] = true
	}
	for _, r := range left {
		if claimed[keyOf(r)] {
			return left, false
		}
	}
	if len(races) > 0 {
		h = newHBBeside(ctx, fixed, true, ord, opt, nil)
		if !h.acyclic { // stopped (ctx): not built whole
			return nil, false
		}
		var sr search
		before := func(x, y event) bool {
			switch h.reach(&sr, x, y, checkBudget) {
			case reachYes:
				return true
			case reachNo:
				return false
			}
			return h.forward(x)[h.node(y)]
		}
		for _, r := range races {
			if !before(r.First.to, r.Second.from) && !before(r.Second.to, r.First.from) {
				return left, false
			}
		}
	}
	return left, true
}

// collapse merges fixes into one FixEdge per pair of op names, with the ranks that need it, in
// the order of their first fix.
func collapse(g *ir.Graph, fixes []Fix) []FixEdge {
	type key struct{ op, after string }
	at := map[key]int{}
	var out []FixEdge
	for _, f := range fixes {
		k := key{g.Ops[f.Op].Name, g.Ops[f.After].Name}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, FixEdge{Op: k.op, After: k.after})
		}
		out[i].Ranks = append(out[i].Ranks, f.Rank)
	}
	for i := range out {
		sort.Ints(out[i].Ranks)
		out[i].Ranks = slices.Compact(out[i].Ranks)
	}
	return out
}

// unfixedText words races, one line per pair of op statements and buffer, followed by why when
// it is not empty.
func unfixedText(g *ir.Graph, races []Race, why string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range races {
		a, b := r.First, r.Second
		if b.Pos.Before(a.Pos) || b.Pos == a.Pos && g.Ops[b.Op].Pos.Before(g.Ops[a.Op].Pos) {
			a, b = b, a
		}
		kind := fmt.Sprintf("%s %s %d", g.Ops[a.Op].Pos, g.Ops[b.Op].Pos, r.Buf())
		if seen[kind] {
			continue
		}
		seen[kind] = true
		line := fmt.Sprintf("%s: race on rank %d's %s between %s and %s", a.Pos, r.Rank(),
			g.SliceString(ir.Slice{Buf: r.Buf(), Off: r.Off, Len: r.Len}), describeOp(g, a.Op), describeOp(g, b.Op))
		if why != "" {
			line += " (" + why + ")"
		}
		out = append(out, line)
	}
	return out
}

// maxHintEdges is how many edges a race's hint lists; the others are counted.
const maxHintEdges = 4

// formatFixes words fixes as an instruction: "add `rx[1] after red[0]` on every rank",
// "add `crd_tx[0] after red[0]` and `crd_tx[1] after red[1]` on every rank", "add `tx[0] after
// cred[3]` on ranks 0, 4". Edges on the same ranks are listed together.
func formatFixes(g *ir.Graph, fixes []Fix) string {
	edges := collapse(g, fixes)
	more := 0
	if len(edges) > maxHintEdges {
		edges, more = edges[:maxHintEdges], len(edges)-maxHintEdges
	}
	var wheres []string
	byWhere := map[string][]string{}
	for _, e := range edges {
		where := "on " + diag.FormatRanks(e.Ranks)
		if g.Ranks > 1 && len(e.Ranks) == g.Ranks {
			where = "on every rank"
		}
		if byWhere[where] == nil {
			wheres = append(wheres, where)
		}
		byWhere[where] = append(byWhere[where], fmt.Sprintf("`%s after %s`", e.Op, e.After))
	}
	var parts []string
	for _, where := range wheres {
		parts = append(parts, joinAnd(byWhere[where])+" "+where)
	}
	text := "add " + strings.Join(parts, ", and ")
	if more > 0 {
		text += fmt.Sprintf(", and %d more such edges (check --explain-races lists every edge the plan needs)", more)
	}
	return text
}

// String lists the edges, one per line.
func (p FixPlan) String() string {
	var b strings.Builder
	for _, e := range p.Edges {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}
