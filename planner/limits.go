package planner

import (
	"math"

	"github.com/coredag/coredag/dsl"
)

// BytesPerOp is about what one op of a plan costs in memory from elaboration to a run: the op,
// its name, the happens-before and race checks, the compiled WQEs and the engines' state. A
// memory budget divided by it caps the ops of a plan (Limits).
const BytesPerOp = 2 << 10

// Limits lower the limits of Elaborate for one call.
type Limits struct {
	// MaxOps, when positive and below MaxOps, is the most ops the plan may have over all ranks.
	MaxOps int
	// Why says where MaxOps comes from, for the diagnostic (e.g. the memory budget).
	Why string
}

// LoadLimited is Load within lim.
func LoadLimited(filename string, src []byte, params map[string]int64, lim Limits) (*Graph, error) {
	f, err := dsl.Parse(filename, src)
	if err != nil {
		return nil, err
	}
	g, err := ElaborateLimited(f, params, lim)
	if err != nil {
		return nil, err
	}
	return g, Check(g)
}

// ElaborateLimited is Elaborate within lim.
func ElaborateLimited(f *dsl.File, params map[string]int64, lim Limits) (*Graph, error) {
	el := &elaborator{file: f, g: &Graph{File: f.Name}, overrides: params, maxOps: maxOps}
	if lim.MaxOps > 0 && lim.MaxOps < maxOps {
		el.maxOps, el.whyMaxOps = lim.MaxOps, lim.Why
	}
	el.run()
	if err := el.result(); err != nil {
		return nil, err
	}
	return el.g, nil
}

// tooManyOps reports that the plan passes the op limit, at pos.
func (el *elaborator) tooManyOps(pos dsl.Pos, detail string) {
	why := "is a loop bound or the rank count wrong?"
	if el.whyMaxOps != "" {
		why = el.whyMaxOps
	}
	el.globalErrorf(phaseNames, pos, "the plan has more than %d ops over all its ranks%s: %s", el.maxOps, detail, why)
	el.truncated = true
}

// loopOps is, before a loop runs, a lower bound of the ops it will make: its trip count times
// the ops its body makes on every pass (minOps). Counting first lets a loop to 10**9 fail at
// once rather than after building millions of ops.
func (el *elaborator) loopOps(from, to, step int64, body []dsl.Stmt, varName string, s *scope) int64 {
	trips := tripCount(from, to, step)
	if trips == 0 {
		return 0
	}
	per := el.minOps(body, s, map[string]bool{varName: true})
	if per == 0 {
		return 0
	}
	if trips > math.MaxInt64/per {
		return math.MaxInt64
	}
	return trips * per
}

// minOps is a lower bound of the ops stmts make each time they run in scope s: the op
// statements outside any if, plus the nested loops whose bounds do not depend on names bound
// inside (inner: the enclosing loops' variables and the lets of their bodies), each counted
// with its own trip count.
func (el *elaborator) minOps(stmts []dsl.Stmt, s *scope, inner map[string]bool) int64 {
	var n int64
	add := func(k int64) {
		if n > math.MaxInt64-k {
			n = math.MaxInt64
		} else {
			n += k
		}
	}
	var bound []string // names bound here, removed from inner on return
	defer func() {
		for _, name := range bound {
			delete(inner, name)
		}
	}()
	for _, st := range stmts {
		switch st := st.(type) {
		case *dsl.LetStmt:
			if !inner[st.Name.Name] {
				inner[st.Name.Name] = true
				bound = append(bound, st.Name.Name)
			}
		case *dsl.OpStmt:
			add(1)
		case *dsl.ForStmt:
			if usesAny(st.From, inner) || usesAny(st.To, inner) || (st.Step != nil && usesAny(st.Step, inner)) {
				continue
			}
			from, err1 := evalInt(st.From, s)
			to, err2 := evalInt(st.To, s)
			step := int64(1)
			var err3 *evalError
			if st.Step != nil {
				step, err3 = evalInt(st.Step, s)
			}
			if err1 != nil || err2 != nil || err3 != nil || step <= 0 || to <= from {
				continue
			}
			shadowed := inner[st.Var.Name]
			inner[st.Var.Name] = true
			per := el.minOps(st.Body, s, inner)
			if !shadowed {
				delete(inner, st.Var.Name)
			}
			trips := tripCount(from, to, step)
			if per > 0 && trips > math.MaxInt64/per {
				add(math.MaxInt64)
			} else {
				add(trips * per)
			}
		}
	}
	return n
}

// tripCount is how many times `for v in from .. to step step` runs (step > 0), or math.MaxInt64
// when that does not fit.
func tripCount(from, to, step int64) int64 {
	if to <= from {
		return 0
	}
	span := uint64(to) - uint64(from)
	if span > math.MaxInt64 {
		return math.MaxInt64
	}
	return (int64(span)-1)/step + 1
}
