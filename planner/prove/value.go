package prove

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/verify"
)

// The general form and the barrier: postconditions that are no collective.

// linearOf is the value of a segment at element off as the general form states values: a sum
// of initial elements and constants (an atomic add's addends), or false when it is none (a
// reduction with another operator, or a value a compare-and-swap computed).
func (s *State) linearOf(y seg, off int64) (ir.Linear, bool) {
	red, atoms, whole := s.sh.at(y.sh, y.shift)
	if !whole || red != plain && red != ir.RedSum {
		return ir.Linear{}, false
	}
	var v ir.Linear
	for _, a := range atoms {
		switch a.kind {
		case atomInit:
			v.Terms = append(v.Terms, ir.Term{Buf: a.buf, Elem: off + a.v, Rank: int(a.rank), N: a.n})
		case atomConst:
			v.Const += a.v * a.n
		default:
			return ir.Linear{}, false
		}
	}
	return v, true
}

// sameLinear reports whether a and b are one value in the arithmetic of type t.
func sameLinear(a, b *ir.Linear, t ir.ElemType) bool {
	if len(a.Terms) != len(b.Terms) {
		return false
	}
	for i := range a.Terms {
		if a.Terms[i] != b.Terms[i] {
			return false
		}
	}
	if bits := 8 * t.Size(); !t.IsFloat() && bits < 64 {
		mask := uint64(1)<<bits - 1
		return uint64(a.Const)&mask == uint64(b.Const)&mask
	}
	return a.Const == b.Const
}

// checkValue returns the diagnostic of a general postcondition e, or nil when it holds: it
// compares every element it states with the value the replay left there.
func (s *State) checkValue(e *ir.Expect) *diag.Diagnostic {
	g := s.g
	t := g.Buffers[e.Dst].Type
	n := e.Hi - e.Lo
	var (
		first        *wrong
		firstWant    *ir.Linear
		elements     int64
		ranks        []int
		got          []seg
		gotLin       ir.Linear
		gotLinearish bool
	)
	for k, r := range e.Ranks {
		bad := false
		for j := range n {
			off := e.Lo + j
			want := &e.Want[int64(k)*n+j]
			got = s.mem.get(got[:0], r, e.Dst, off, off+1, 0)
			y := got[0]
			v, ok := s.linearOf(y, off)
			if ok && sameLinear(&v, want, t) {
				continue
			}
			if first == nil {
				first = &wrong{rank: r, off: off, got: y}
				firstWant, gotLin, gotLinearish = want, v, ok
			}
			elements++
			bad = true
		}
		if bad {
			ranks = append(ranks, r)
		}
	}
	if first == nil {
		return nil
	}
	dst := &g.Buffers[e.Dst]
	elem := fmt.Sprintf("%s[%d]", dst.Name, first.off)
	var holds string
	if gotLinearish {
		holds = g.LinearString(&gotLin)
	} else {
		red, atoms, whole := s.sh.at(first.got.sh, first.got.shift)
		holds = s.describe(red, atoms, whole, first.off)
	}
	msg := fmt.Sprintf("%s: %s on rank %d should hold %s, but holds %s", g.ExpectString(e), elem, first.rank, g.LinearString(firstWant), holds)
	if elements > 1 {
		msg += fmt.Sprintf(" (%d elements wrong in all)", elements)
	}
	d := diag.Errorf(diag.Expect, e.Pos, "%s", msg)
	d.Ranks, d.Likewise = ranks[:1], ranks[1:]
	if first.got.by == ir.None {
		d.Relate(dst.Pos, fmt.Sprintf("%s is never written on rank %d: it keeps its initial contents", elem, first.rank))
	} else {
		d.Relate(g.Ops[first.got.by].Pos, fmt.Sprintf("%s on rank %d was last written by %s", elem, first.rank, g.OpString(first.got.by)))
	}
	return d
}

// barrier returns the diagnostic of `expect barrier` when the plan is no barrier. Stopped (ctx),
// its search says nothing.
func barrier(ctx context.Context, g *ir.Graph, o *verify.Order, e *ir.Expect) *diag.Diagnostic {
	gap, ok, within := o.Barrier(ctx)
	switch {
	case !within:
		return diag.Errorf(diag.Limit, e.Pos, "expect barrier: cannot prove: the search of the happens-before graph from every rank would take more than %d steps", verify.MaxBarrierWork)
	case ok:
		return nil
	}
	msg := fmt.Sprintf("expect barrier: rank %d may leave before rank %d has entered: no op of rank %d happens before any op of rank %d ends", gap.Left, gap.Entered, gap.Entered, gap.Left)
	if gap.Pairs > 1 {
		msg += fmt.Sprintf(" (%s in all)", english.Plural(gap.Pairs, "such pair"))
	}
	return diag.Errorf(diag.Expect, e.Pos, "%s", msg)
}

// constant is the value of segment y when it is known: a constant, or a sum of constants.
func (s *State) constant(y seg) (int64, bool) {
	red, atoms, whole := s.sh.at(y.sh, y.shift)
	if !whole || red != plain && red != ir.RedSum {
		return 0, false
	}
	var v int64
	for _, a := range atoms {
		if a.kind != atomConst {
			return 0, false
		}
		v += a.v * a.n
	}
	return v, true
}
