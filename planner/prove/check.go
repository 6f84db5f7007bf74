package prove

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// want is what a postcondition asks of [lo, hi) of its buffer on one rank: shape sh at shift.
type want struct {
	lo, hi int64
	sh     int32
	shift  int64
}

// spec appends to out what postcondition e asks of rank r (nothing, for the ranks and blocks it
// says nothing about). all is the shape of the reduction over every rank it may ask for.
func (s *State) spec(out []want, e *ir.Expect, r int, all int32) []want {
	g := s.g
	n := g.Buffers[e.Dst].Count
	ranks := g.Ranks
	blk := n / int64(ranks)
	init := func(q int, delta int64) (int32, int64) { // element delta of Src's initial contents on q
		return s.mem.init[q*s.mem.nbuf+int(e.Src)], delta
	}
	add := func(lo, hi int64, id int32, shift int64) {
		out = append(out, want{lo: lo, hi: hi, sh: id, shift: shift})
	}
	switch e.Kind {
	case ir.ExpectAllreduce:
		add(0, n, all, 0)
	case ir.ExpectReduce:
		if r == e.Root {
			add(0, n, all, 0)
		}
	case ir.ExpectReduceScatter:
		add(int64(r)*blk, int64(r+1)*blk, all, 0)
	case ir.ExpectBroadcast:
		id, shift := init(e.Root, 0)
		add(0, n, id, shift)
	case ir.ExpectUnchanged:
		id, shift := init(r, 0)
		add(0, n, id, shift)
	case ir.ExpectAllgather, ir.ExpectGather:
		if e.Kind == ir.ExpectGather && r != e.Root {
			break
		}
		for b := 0; b < ranks; b++ {
			delta := -int64(b) * blk // block b of Dst is Src@b from its start
			if e.SrcBlock {
				delta = 0 // or Dst's own block b on rank b
			}
			id, shift := init(b, delta)
			add(int64(b)*blk, int64(b+1)*blk, id, shift)
		}
	case ir.ExpectAlltoall:
		for q := 0; q < ranks; q++ { // block q of Dst on r is block r of Src@q
			id, shift := init(q, int64(r-q)*blk)
			add(int64(q)*blk, int64(q+1)*blk, id, shift)
		}
	case ir.ExpectScatter:
		id, shift := init(e.Root, int64(r)*n)
		add(0, n, id, shift)
	}
	return out
}

// wrong is the first element found to break a postcondition, with what it should hold and holds.
type wrong struct {
	rank     int
	off      int64
	want     want
	got      seg
	elements int64 // wrong elements on all ranks
	ranks    []int // ranks with a wrong element
}

// check returns the diagnostic of postcondition e, or nil when it holds.
func (s *State) check(e *ir.Expect) *diag.Diagnostic {
	var w *wrong
	var wants []want
	var got []seg
	all, _ := s.sh.all(e.Red, e.Src, s.g.Ranks) // of element 0 of Src: its shift is 0
	for r := 0; r < s.g.Ranks; r++ {
		wants = s.spec(wants[:0], e, r, all)
		bad := false
		for _, x := range wants {
			got = s.mem.get(got[:0], r, e.Dst, x.lo, x.hi, 0)
			for _, y := range got {
				if y.shift == x.shift && s.sh.equal(y.sh, x.sh) {
					continue
				}
				if w == nil {
					w = &wrong{rank: r, off: y.lo, want: x, got: y}
				}
				w.elements += y.hi - y.lo
				bad = true
			}
		}
		if bad {
			w.ranks = append(w.ranks, r)
		}
	}
	if w == nil {
		return nil
	}
	return s.explain(e, w)
}

// explain words a failed postcondition.
func (s *State) explain(e *ir.Expect, w *wrong) *diag.Diagnostic {
	g := s.g
	dst := &g.Buffers[e.Dst]
	elem := fmt.Sprintf("%s[%d]", dst.Name, w.off)
	wantRed, wantAtoms := s.sh.at(w.want.sh, w.want.shift)
	gotRed, gotAtoms := s.sh.at(w.got.sh, w.got.shift)
	msg := fmt.Sprintf("%s: %s on rank %d should hold %s, but holds %s",
		g.ExpectString(e), elem, w.rank, s.describe(wantRed, wantAtoms, w.off), s.describe(gotRed, gotAtoms, w.off))
	if why := s.difference(wantRed, wantAtoms, gotRed, gotAtoms, w.off); why != "" {
		msg += " — " + why
	}
	if w.elements > 1 {
		msg += fmt.Sprintf(" (%d elements wrong in all)", w.elements)
	}
	d := diag.Errorf(diag.Expect, e.Pos, "%s", msg)
	d.Ranks, d.Likewise = w.ranks[:1], w.ranks[1:]
	if w.got.by == ir.None {
		d.Relate(dst.Pos, fmt.Sprintf("%s is never written on rank %d: it keeps its initial contents", elem, w.rank))
	} else {
		d.Relate(g.Ops[w.got.by].Pos, fmt.Sprintf("%s on rank %d was last written by %s", elem, w.rank, g.OpString(w.got.by)))
	}
	return d
}

// term names one atom as seen from element off: "data[8]@1", "the constant 3".
func (s *State) term(a atom, off int64) string {
	switch a.kind {
	case atomConst:
		return fmt.Sprintf("the constant %d", a.v)
	case atomOpaque:
		return fmt.Sprintf("a value computed by %s", s.g.OpString(ir.OpID(a.v)))
	}
	return fmt.Sprintf("%s[%d]@%d", s.g.Buffers[a.buf].Name, off+a.v, a.rank)
}

// describe words a value at element off: "data[8]@1", "the sum over ranks 0-3 of data[8]".
func (s *State) describe(red ir.ReduceOp, atoms []atom, off int64) string {
	if red == plain {
		return s.term(atoms[0], off)
	}
	// Group initial elements by (buffer, element): a collective's value is one group.
	type key struct {
		buf ir.BufID
		el  int64
	}
	var order []key
	ranks := map[key][]int{}
	var rest []string
	for _, a := range atoms {
		if a.kind != atomInit {
			rest = append(rest, s.term(a, off))
			continue
		}
		k := key{a.buf, off + a.v}
		if _, ok := ranks[k]; !ok {
			order = append(order, k)
		}
		ranks[k] = append(ranks[k], int(a.rank))
	}
	var parts []string
	for _, k := range order {
		rs := ranks[k]
		el := fmt.Sprintf("%s[%d]", s.g.Buffers[k.buf].Name, k.el)
		if len(rs) == 1 {
			parts = append(parts, fmt.Sprintf("%s@%d", el, rs[0]))
			continue
		}
		dup := ""
		if counts := count(rs); len(counts) < len(rs) {
			var more []string
			for _, r := range uniqSorted(rs) {
				if counts[r] > 1 {
					more = append(more, fmt.Sprintf("rank %d's %s", r, times(counts[r])))
				}
			}
			dup = " (" + strings.Join(more, ", ") + ")"
		}
		parts = append(parts, fmt.Sprintf("%s of %s%s", diag.FormatRanks(rs), el, dup))
	}
	parts = append(parts, rest...)
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("and %d more", len(parts)-6))
	}
	if len(order) == 1 && len(rest) == 0 {
		return fmt.Sprintf("the %s over %s", red, parts[0])
	}
	return fmt.Sprintf("the %s of %s", red, strings.Join(parts, ", "))
}

// difference words what separates a wrong value from the right one: the contributions missing
// and those that should not be there.
func (s *State) difference(wantRed ir.ReduceOp, want []atom, gotRed ir.ReduceOp, got []atom, off int64) string {
	if wantRed == plain && gotRed == plain {
		return "" // one element in place of another: the message says both
	}
	if wantRed != gotRed && wantRed != plain && gotRed != plain {
		return fmt.Sprintf("a %s where a %s is due", gotRed, wantRed)
	}
	missing, extra := diff(want, got)
	var why []string
	if len(missing) > 0 {
		why = append(why, s.contributions(missing, off, "missing"))
	}
	// Extra terms that are due once are counted too often; the others are not due at all.
	var again, foreign []atom
	for _, a := range extra {
		if slices.Contains(want, a) {
			again = append(again, a)
		} else {
			foreign = append(foreign, a)
		}
	}
	if len(again) > 0 {
		why = append(why, s.contributions(again, off, "counted too often"))
	}
	if len(foreign) > 0 && len(got) > 1 {
		why = append(why, s.contributions(foreign, off, "not due"))
	}
	return strings.Join(why, "; ")
}

// contributions words a list of atoms that are missing or not due: "rank 3's contribution is
// missing" when they are one element of one buffer on several ranks.
func (s *State) contributions(atoms []atom, off int64, what string) string {
	same := true
	for _, a := range atoms {
		same = same && a.kind == atomInit && a.buf == atoms[0].buf && a.v == atoms[0].v
	}
	if same {
		rs := make([]int, len(atoms))
		for i, a := range atoms {
			rs[i] = int(a.rank)
		}
		if len(rs) == 1 {
			return fmt.Sprintf("rank %d's contribution is %s", rs[0], what)
		}
		return fmt.Sprintf("the contributions of %s are %s", diag.FormatRanks(rs), what)
	}
	terms := make([]string, 0, len(atoms))
	for _, a := range atoms {
		terms = append(terms, s.term(a, off))
	}
	if len(terms) > 6 {
		terms = append(terms[:6], fmt.Sprintf("and %d more", len(terms)-6))
	}
	return strings.Join(terms, ", ") + " " + map[bool]string{true: "is", false: "are"}[len(atoms) == 1] + " " + what
}

// diff returns the atoms of want not in got and of got not in want, as multisets (both sorted).
func diff(want, got []atom) (missing, extra []atom) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i].less(got[j]):
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j].less(want[i]):
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}

// count counts each rank of rs.
func count(rs []int) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		m[r]++
	}
	return m
}

func uniqSorted(rs []int) []int {
	out := slices.Clone(rs)
	slices.Sort(out)
	return slices.Compact(out)
}

// times words a count: "twice", "3 times".
func times(n int) string {
	if n == 2 {
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
