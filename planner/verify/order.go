package verify

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// The ordering a transport gives between the ops of one queue (ir.Order), as extra edges of the
// happens-before graph (hb.go): land(p) -> land(n) for consecutive ops p, n of one send side when
// the ordering orders n's kind after p's. The race search runs without them first; these are the
// steps that follow when it finds races.

// usedOrder is every ordering some pair of consecutive ops of g's send sides could use.
func usedOrder(g *ir.Graph) ir.Order {
	var o ir.Order
	for qi := range g.Queues {
		side := g.Queues[qi].SendOps
		for k := 1; k < len(side) && o != ir.OrderStrict; k++ {
			o |= ir.Between(g.Ops[side[k-1]].Kind.Class(), g.Ops[side[k]].Kind.Class())
		}
	}
	return o
}

// racesUnder returns the races of g under the ordering ord and its happens-before graph (ok
// false when that graph has a cycle, or when the checks are stopped: ctx).
func racesUnder(ctx context.Context, g *ir.Graph, ord ir.Order, opt *Options) (races []Race, h *hbGraph, ok bool) {
	h = newHBBeside(ctx, g, true, ord, opt, nil)
	if !h.acyclic || stop.Cause(ctx) != nil {
		return nil, h, false
	}
	races = findRacesOn(ctx, g, h, 0, nil, nil)
	return races, h, stop.Cause(ctx) == nil
}

// fewest returns a smallest part need of extra such that g has at most want races under
// base|need, given that it has at most want under base|extra: the orderings of extra it needs,
// dropped one by one while it keeps to want.
func fewest(ctx context.Context, g *ir.Graph, base, extra ir.Order, want int, opt *Options) ir.Order {
	need := extra
	for bit := ir.Order(1); bit <= ir.OrderSAS; bit <<= 1 {
		if need&bit == 0 {
			continue
		}
		if races, _, ok := racesUnder(ctx, g, base|need&^bit, opt); ok && len(races) <= want {
			need &^= bit
		}
	}
	return need
}

// raceKey names a race by its pair of ops and its memory, whichever access comes first.
type raceKey struct {
	a, b ir.OpID
	rank int
	buf  ir.BufID
}

func keyOf(r Race) raceKey {
	a, b := r.First.Op, r.Second.Op
	if b < a {
		a, b = b, a
	}
	return raceKey{a, b, r.Rank(), r.Buf()}
}

// orderedRaces continues Races once the search without ordering found races (h is its graph):
// it searches again under Options.Order, if some pair of ops could use it. When that finds none,
// the plan passes, relying on the ordering; otherwise it returns the races under the ordering,
// those that an ordering some target gives would remove saying so (when Options.Target is set).
func (o *Order) orderedRaces(ctx context.Context, h *hbGraph, races []Race) diag.List {
	g, opt := o.g, o.opt
	used := usedOrder(g)
	have := opt.Order & used
	unordered := races
	if have != ir.OrderNone {
		if r, hr, ok := racesUnder(ctx, g, have, opt); ok {
			if len(r) == 0 {
				o.rely = &reliance{races: unordered, have: have, used: used}
				o.ordered = &Order{g: g, topo: hr.topo, opt: opt, rely: o.rely}
				return nil
			}
			h, races = hr, r
		}
	}
	var note func(Race) string
	if extra := ir.OrderStrict &^ have & used; opt.Target != "" && extra != ir.OrderNone && stop.Cause(ctx) == nil {
		note = o.missing(ctx, races, have, extra)
	}
	if stop.Cause(ctx) != nil {
		return nil
	}
	return raceErrors(ctx, g, h, races, note)
}

// missing returns the note of the races under the ordering have that the orderings of extra
// would remove, or nil when they remove none: the fewest orderings that would, and the targets
// that give them.
func (o *Order) missing(ctx context.Context, races []Race, have, extra ir.Order) func(Race) string {
	g, opt := o.g, o.opt
	left, _, ok := racesUnder(ctx, g, have|extra, opt)
	if !ok || len(left) >= len(races) {
		return nil
	}
	need := fewest(ctx, g, have, extra, len(left), opt)
	stays := map[raceKey]bool{}
	for _, r := range left {
		stays[keyOf(r)] = true
	}
	var give []string
	for _, t := range ir.Targets() {
		if t.Order&(have|need) == have|need {
			give = append(give, "`"+t.Name+"`")
		}
	}
	text := fmt.Sprintf("; only %s between the ops of a queue would order them, which target `%s` does not give", need.Describe(), opt.Target)
	if len(give) > 0 {
		text += fmt.Sprintf(" (%s %s)", joinAnd(give), map[bool]string{true: "gives it", false: "give it"}[len(give) == 1])
	}
	return func(r Race) string {
		if stays[keyOf(r)] {
			return ""
		}
		return text
	}
}

// reliance is what a plan race-free only under Options.Order relies on.
type reliance struct {
	races      []Race   // its races without any ordering
	have, used ir.Order // the target's orderings that pairs of its ops could use; all such

	// mu guards what follows: what Relied and Reliance find, kept once found under a context
	// that was not cancelled (a cancelled search finds a part of it, which is not kept).
	mu       sync.Mutex
	needDone bool
	need     ir.Order         // the fewest of have it relies on, once needDone
	uses     *ir.Reliance     // Relied's answer, once found
	d        *diag.Diagnostic // Reliance's, once found
}

// needed is the fewest orderings of Options.Order the plan relies on (rl is o.rely, not nil;
// rl.mu is held). Stopped by ctx, it means nothing, and is not kept.
func (o *Order) needed(ctx context.Context, rl *reliance) ir.Order {
	if rl.needDone {
		return rl.need
	}
	need := fewest(ctx, o.g, ir.OrderNone, rl.have, 0, o.opt)
	if stop.Cause(ctx) == nil {
		rl.need, rl.needDone = need, true
	}
	return need
}

// Relied returns, once Races has found no race, what the plan relies on: the fewest orderings of
// Options.Order without which a race comes back, and for each the pair of ops of a queue it
// orders and that race; nil when the plan relies on no ordering. It costs a race search per
// ordering until a call finds the answer, which is then kept; ctx stops the searches, and what
// a call stopped by it returns means nothing (it is not kept: a later call searches again).
// Calls may be concurrent: they search one at a time.
func (o *Order) Relied(ctx context.Context) *ir.Reliance {
	rl := o.rely
	if rl == nil {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.uses != nil {
		return rl.uses
	}
	g, need := o.g, o.needed(ctx, rl)
	r := &ir.Reliance{Order: need}
	for bit := ir.Order(1); bit <= ir.OrderSAS; bit <<= 1 {
		if need&bit == 0 {
			continue
		}
		u := ir.OrderUse{Order: bit, Prev: ir.None, Next: ir.None}
		if races, _, ok := racesUnder(ctx, g, need&^bit, o.opt); ok && len(races) > 0 {
			race := firstRace(g, races)
			u.Prev, u.Next = orderedPair(g, race, bit)
			a, b := race.First, race.Second
			if b.Pos.Before(a.Pos) || b.Pos == a.Pos && g.Ops[b.Op].Pos.Before(g.Ops[a.Op].Pos) {
				a, b = b, a
			}
			u.Race = raceError(g, race, a, b).Msg
		}
		r.Uses = append(r.Uses, u)
	}
	if stop.Cause(ctx) == nil {
		rl.uses = r
	}
	return r
}

// firstRace is the race of races whose first op is declared first, then on the lowest rank: the
// same one whatever the order the search found them in.
func firstRace(g *ir.Graph, races []Race) Race {
	best := races[0]
	for _, r := range races[1:] {
		if c := g.Ops[r.First.Op].Pos.Compare(g.Ops[best.First.Op].Pos); c < 0 || c == 0 && r.First.Op < best.First.Op {
			best = r
		}
	}
	return best
}

// orderedPair finds the ops of one queue side whose landings the ordering bit orders for race
// r: an op of the race on a send side and the first later op of that side that bit orders after
// it; failing that, the first such pair of consecutive ops anywhere (None, None if none).
func orderedPair(g *ir.Graph, r Race, bit ir.Order) (prev, next ir.OpID) {
	for _, x := range []ir.OpID{r.First.Op, r.Second.Op} {
		op := &g.Ops[x]
		if op.Queue == ir.None || op.Kind.Class() == 0 {
			continue
		}
		side := g.Queues[op.Queue].SendOps
		for k := int(op.Index) + 1; k < len(side); k++ {
			if ir.Between(op.Kind.Class(), g.Ops[side[k]].Kind.Class())&bit != 0 {
				return x, side[k]
			}
		}
	}
	for qi := range g.Queues {
		side := g.Queues[qi].SendOps
		for k := 1; k < len(side); k++ {
			if ir.Between(g.Ops[side[k-1]].Kind.Class(), g.Ops[side[k]].Kind.Class())&bit != 0 {
				return side[k-1], side[k]
			}
		}
	}
	return ir.None, ir.None
}

// Ordered returns, once Races has found no race, the order of the events under Options.Order
// when the plan is race-free only thanks to it (its events may then be ordered differently than
// in o), else nil.
func (o *Order) Ordered() *Order { return o.ordered }

// Reliance returns, once Races has found no race, a warning when the plan is race-free only
// thanks to Options.Order: which orderings it relies on and which built-in targets lack them
// (where it is a race), at the first race it has without ordering; nil when it relies on none.
// It costs a few race searches until a call finds the warning, which is then kept; ctx stops
// the searches, and what a call stopped by it returns means nothing (it is not kept: a later
// call searches again). Calls may be concurrent: they search one at a time.
func (o *Order) Reliance(ctx context.Context) *diag.Diagnostic {
	rl := o.rely
	if rl == nil {
		return nil
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.d != nil {
		return rl.d
	}
	g, opt := o.g, o.opt
	need := o.needed(ctx, rl)
	// The targets that do not give need may give another ordering that suffices: each
	// distinct ordering is searched once.
	var lack []string
	safe := map[ir.Order]bool{}
	for _, t := range ir.Targets() {
		ord := t.Order & rl.used
		if t.Order&need == need {
			continue
		}
		ok, seen := safe[ord]
		if !seen {
			r, _, acyclic := racesUnder(ctx, g, ord, opt)
			ok = acyclic && len(r) == 0
			safe[ord] = ok
		}
		if !ok {
			lack = append(lack, "`"+t.Name+"`")
		}
	}
	r := rl.races[0]
	a, b := r.First, r.Second
	if b.Pos.Before(a.Pos) || b.Pos == a.Pos && g.Ops[b.Op].Pos.Before(g.Ops[a.Op].Pos) {
		a, b = b, a
	}
	race := raceError(g, r, a, b)
	verb := "do not give"
	if len(lack) == 1 {
		verb = "does not give"
	}
	msg := fmt.Sprintf("the plan relies on %s between the ops of a queue", need.Describe())
	if len(lack) > 0 {
		msg += fmt.Sprintf(", which %s %s: there, %s", joinAnd(lack), verb, race.Msg)
	} else {
		msg += ": without it, " + race.Msg
	}
	d := diag.Errorf(diag.Race, a.Pos, "%s", msg)
	d.Related = race.Related
	if stop.Cause(ctx) == nil {
		rl.d = d
	}
	return d
}

// joinAnd joins words with commas and a last "and".
func joinAnd(words []string) string {
	if n := len(words); n > 1 {
		return strings.Join(words[:n-1], ", ") + " and " + words[n-1]
	}
	return strings.Join(words, "")
}
