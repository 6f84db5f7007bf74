package planner

import (
	"github.com/coredag/coredag/diag"
)

// Verify runs the verification phase over a Graph that passed the front-end checks (names,
// bounds, matching, access flags). It works in three steps, each run only when the previous one
// is clean, so one mistake gives one message rather than a cascade:
//
//  1. dependency cycles among `after` edges (checkCycles);
//  2. FIFO deadlocks: an `after` against the order of one queue side, and loops of waits through
//     queue order and send/recv matching, within a rank or across ranks (checkFIFO);
//  3. races under the happens-before relation of DSL.md (Races), one message per pair of op
//     statements and buffer, naming the ranks it occurs on and the `after` that would fix it.
//
// The returned list is sorted by position.
func Verify(g *Graph) diag.List {
	if len(g.Ops) == 0 {
		return nil
	}
	errs := checkCycles(g)
	if len(errs) == 0 {
		var h *hbGraph
		errs, h = checkFIFO(g)
		if len(errs) == 0 {
			errs = raceErrors(g, h)
		}
	}
	errs.Sort()
	return errs
}

// reportGroups merges the instances of one SPMD mistake across ranks: instances with the same key
// (usually the source positions involved) become one diagnostic that names all their ranks.
type reportGroups struct {
	keys  []string
	byKey map[string]*reportGroup
}

type reportGroup struct {
	ranks []int
	build func(ranks string) *diag.Diagnostic
}

// add records one instance. build makes the diagnostic of the group's first instance, given the
// formatted rank set of the whole group.
func (r *reportGroups) add(key string, ranks []int, build func(ranks string) *diag.Diagnostic) {
	if r.byKey == nil {
		r.byKey = make(map[string]*reportGroup)
	}
	grp, ok := r.byKey[key]
	if !ok {
		grp = &reportGroup{build: build}
		r.byKey[key] = grp
		r.keys = append(r.keys, key)
	}
	grp.ranks = append(grp.ranks, ranks...)
}

// errors returns one diagnostic per group, in the order the groups were first seen.
func (r *reportGroups) errors() diag.List {
	var list diag.List
	for _, k := range r.keys {
		grp := r.byKey[k]
		list = append(list, grp.build(diag.FormatRanks(grp.ranks)))
	}
	return list
}
