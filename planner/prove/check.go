package prove

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
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
	if e.Vec != nil { // per-rank blocks: Dst[lo:hi] holds Src from at, of one rank or reduced
		s.pieces = e.Pieces(s.pieces[:0], ranks, r)
		for _, p := range s.pieces {
			if p.From < 0 {
				add(p.Lo, p.Hi, all, p.At-p.Lo)
				continue
			}
			id, shift := init(p.From, p.At-p.Lo)
			add(p.Lo, p.Hi, id, shift)
		}
		return out
	}
	switch e.Kind {
	case ir.ExpectAllreduce:
		add(0, n, all, 0)
	case ir.ExpectReduce:
		if r == e.Root {
			add(0, n, all, 0)
		}
	case ir.ExpectReduceScatter:
		if e.DstBlock { // all of Dst is block r of the reduction
			add(0, n, all, int64(r)*n)
			break
		}
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

// check returns the diagnostic of postcondition e, or nil when it holds. The replays that trace
// a failure back stop once ctx is cancelled.
func (s *State) check(ctx context.Context, e *ir.Expect) *diag.Diagnostic {
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
	return s.explain(ctx, e, w)
}

// explain words a failed postcondition.
func (s *State) explain(ctx context.Context, e *ir.Expect, w *wrong) *diag.Diagnostic {
	g := s.g
	dst := &g.Buffers[e.Dst]
	elem := fmt.Sprintf("%s[%d]", dst.Name, w.off)
	var msg string
	if t, ok := s.sh.tooMany(w.got.sh); ok {
		msg = fmt.Sprintf("%s: cannot prove: multiplicity exceeds %d: %s on rank %d holds a value in which %s counts one contribution more than %d times",
			g.ExpectString(e), maxCount, elem, w.rank, g.OpString(ir.OpID(t.v)), maxCount)
	} else {
		wantRed, want, wantWhole := s.sh.at(w.want.sh, w.want.shift)
		gotRed, got, gotWhole := s.sh.at(w.got.sh, w.got.shift)
		msg = fmt.Sprintf("%s: %s on rank %d%s should hold %s, but holds %s",
			g.ExpectString(e), elem, w.rank, s.blockOf(e, w.rank, w.off), s.describe(wantRed, want, wantWhole, w.off), s.describe(gotRed, got, gotWhole, w.off))
		if !wantWhole || !gotWhole {
			// the lists were cut short: what separates them is not known
		} else if why := s.difference(wantRed, want, gotRed, got, w.off); why != "" {
			msg += " — " + why
		}
	}
	if w.elements > 1 {
		msg += fmt.Sprintf(" (%d elements wrong in all)", w.elements)
	}
	d := diag.Errorf(diag.Expect, e.Pos, "%s", msg)
	d.Ranks, d.Likewise = w.ranks[:1], w.ranks[1:]
	if w.got.by == ir.None {
		d.Relate(dst.Pos, fmt.Sprintf("%s is never written on rank %d: it keeps its initial contents", elem, w.rank))
	} else if s.traceBack(ctx, d, e, w) {
		// related: the op where it first went wrong
	} else {
		d.Relate(g.Ops[w.got.by].Pos, fmt.Sprintf("%s on rank %d was last written by %s", elem, w.rank, g.OpString(w.got.by)))
	}
	return d
}

// blockOf words the block of a vector postcondition that holds element off on rank r, as its
// counts and displacements make it: " (in the block from rank 1, dst[2:4] = src[0:2]@1)"; ""
// for the other forms.
func (s *State) blockOf(e *ir.Expect, r int, off int64) string {
	if e.Vec == nil {
		return ""
	}
	dst, src := s.g.Buffers[e.Dst].Name, s.g.Buffers[e.Src].Name
	for _, p := range e.Pieces(nil, s.g.Ranks, r) {
		if off < p.Lo || off >= p.Hi {
			continue
		}
		if p.From < 0 {
			return fmt.Sprintf(" (in rank %d's block, %s[%d:%d] = the %s over ranks of %s[%d:%d])", r, dst, p.Lo, p.Hi, e.Red, src, p.At, p.At+p.Hi-p.Lo)
		}
		return fmt.Sprintf(" (in the block from rank %d, %s[%d:%d] = %s[%d:%d]@%d)", p.From, dst, p.Lo, p.Hi, src, p.At, p.At+p.Hi-p.Lo, p.From)
	}
	return ""
}

// term names one atom as seen from element off: "data[8]@1", "the constant 3".
func (s *State) term(a atom, off int64) string {
	switch a.kind {
	case atomConst:
		return fmt.Sprintf("the constant %d", a.v)
	case atomOpaque:
		return fmt.Sprintf("a value computed by %s", s.g.OpString(ir.OpID(a.v)))
	case atomTooMany:
		return fmt.Sprintf("a value %s counts past %d times", s.g.OpString(ir.OpID(a.v)), maxCount)
	}
	return fmt.Sprintf("%s[%d]@%d", s.g.Buffers[a.buf].Name, off+a.v, a.rank)
}

// maxParts is how many parts of a value or of a difference a message lists.
const maxParts = 6

// listed joins parts, the first maxParts of them and how many more there are ("and 3 more");
// past is how many more there are beyond parts.
func listed(parts []string, past int) string {
	if more := len(parts) - maxParts + past; more > 0 {
		parts = append(parts[:min(len(parts), maxParts):min(len(parts), maxParts)], fmt.Sprintf("and %d more", more))
	}
	return strings.Join(parts, ", ")
}

// describe words a value at element off: "data[8]@1", "the sum over ranks 0-3 of data[8]",
// "the sum over rank 0 of data[8] (rank 0's 16777216 times)". whole is false when atoms is
// not all of it.
func (s *State) describe(red ir.ReduceOp, atoms []counted, whole bool, off int64) string {
	if red == plain && len(atoms) == 1 {
		return s.term(atoms[0].atom, off)
	}
	// Group initial elements by (buffer, element): a collective's value is one group. The
	// atoms are sorted, so a group's atoms follow one another, one per rank.
	var parts []string
	groups, rest := 0, 0
	for i := 0; i < len(atoms); {
		a := atoms[i]
		if a.kind != atomInit {
			rest++
			if len(parts) <= maxParts {
				p := s.term(a.atom, off)
				if a.n > 1 {
					p += " (" + times(a.n) + ")"
				}
				parts = append(parts, p)
			}
			i++
			continue
		}
		j := i + 1
		for j < len(atoms) && atoms[j].kind == atomInit && atoms[j].buf == a.buf && atoms[j].v == a.v {
			j++
		}
		groups++
		if len(parts) <= maxParts {
			parts = append(parts, s.group(atoms[i:j], off))
		}
		i = j
	}
	past := groups + rest - len(parts)
	if !whole {
		past++ // at least one: "and 1 more" reads as "and more" would not
	}
	if len(parts) == 0 {
		return fmt.Sprintf("an empty %s", red) // no shape has no atom; said plainly all the same
	}
	if groups == 1 && rest == 0 && whole {
		return fmt.Sprintf("the %s over %s", red, parts[0])
	}
	return fmt.Sprintf("the %s of %s", red, listed(parts, past))
}

// group words one element of one buffer on several ranks, each with its count: "data[8]@1",
// "ranks 0-3 of data[8]", "rank 0 of data[8] (rank 0's 9 times)".
func (s *State) group(atoms []counted, off int64) string {
	a := atoms[0]
	el := fmt.Sprintf("%s[%d]", s.g.Buffers[a.buf].Name, off+a.v)
	if len(atoms) == 1 && a.n == 1 {
		return fmt.Sprintf("%s@%d", el, a.rank)
	}
	rs := make([]int, len(atoms))
	var more []string
	over := 0
	for i, c := range atoms {
		rs[i] = int(c.rank)
		if c.n > 1 {
			if len(more) == maxParts {
				over++
				continue
			}
			more = append(more, fmt.Sprintf("rank %d's %s", c.rank, times(c.n)))
		}
	}
	dup := ""
	if len(more) > 0 {
		dup = " (" + listed(more, over) + ")"
	}
	return fmt.Sprintf("%s of %s%s", diag.FormatRanks(rs), el, dup)
}

// difference words what separates a wrong value from the right one: the contributions missing
// and those that should not be there.
func (s *State) difference(wantRed ir.ReduceOp, want []counted, gotRed ir.ReduceOp, got []counted, off int64) string {
	if wantRed == plain && gotRed == plain {
		return "" // one element in place of another: the message says both
	}
	if wantRed != gotRed && wantRed != plain && gotRed != plain {
		return fmt.Sprintf("a %s where a %s is due", gotRed, wantRed)
	}
	missing, again, foreign := diff(want, got)
	if why := s.displaced(missing, again, foreign, off); why != "" {
		return why
	}
	var why []string
	if len(missing) > 0 {
		why = append(why, s.contributions(missing, off, "missing"))
	}
	// Extra terms that are due once are counted too often; the others are not due at all.
	if len(again) > 0 {
		why = append(why, s.contributions(again, off, "counted too often"))
	}
	if len(foreign) > 0 && (len(got) > 1 || got[0].n > 1) {
		why = append(why, s.contributions(foreign, off, "not due"))
	}
	return strings.Join(why, "; ")
}

// oneElem reports whether atoms are all about one initial element (of one buffer, on several
// ranks), and their ranks.
func oneElem(atoms []counted) ([]int, bool) {
	rs := make([]int, 0, len(atoms))
	for _, a := range atoms {
		if a.kind != atomInit || a.buf != atoms[0].buf || a.v != atoms[0].v {
			return nil, false
		}
		rs = append(rs, int(a.rank))
	}
	return rs, len(atoms) > 0
}

// displaced words a value that holds another element's contributions in place of its own
// (data from the wrong offset): "another element's contributions: the contributions of ranks 0-4
// to data[2] in place of theirs to data[0], data from 2 elements further on". It is "" for
// other differences.
func (s *State) displaced(missing, again, foreign []counted, off int64) string {
	mr, ok1 := oneElem(missing)
	fr, ok2 := oneElem(foreign)
	if !ok1 || !ok2 || len(again) > 0 {
		return ""
	}
	m, f := missing[0], foreign[0]
	name := func(a counted) string { return fmt.Sprintf("%s[%d]", s.g.Buffers[a.buf].Name, off+a.v) }
	whose := func(rs []int) string {
		if len(rs) == 1 {
			return fmt.Sprintf("the contribution of rank %d", rs[0])
		}
		return "the contributions of " + diag.FormatRanks(rs)
	}
	var from string
	switch d := f.v - m.v; {
	case f.buf != m.buf:
		from = fmt.Sprintf("from %s, not %s", s.g.Buffers[f.buf].Name, s.g.Buffers[m.buf].Name)
	case d > 0:
		from = fmt.Sprintf("data from %s further on", english.Plural(int(d), "element"))
	default:
		from = fmt.Sprintf("data from %s earlier", english.Plural(int(-d), "element"))
	}
	theirs := "theirs"
	if !slices.Equal(mr, fr) {
		theirs = whose(mr)
	} else if len(mr) == 1 {
		theirs = "its"
	}
	return fmt.Sprintf("another element's contributions: %s to %s in place of %s to %s, %s", whose(fr), name(f), theirs, name(m), from)
}

// contributions words a list of atoms that are missing or not due: "rank 3's contribution is
// missing" when they are one element of one buffer on several ranks.
func (s *State) contributions(atoms []counted, off int64, what string) string {
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
	terms := make([]string, 0, min(len(atoms), maxParts))
	for _, a := range atoms[:min(len(atoms), maxParts)] {
		terms = append(terms, s.term(a.atom, off))
	}
	verb := "are"
	if len(atoms) == 1 {
		verb = "is"
	}
	return listed(terms, len(atoms)-len(terms)) + " " + verb + " " + what
}

// diff compares want and got as multisets (both sorted, one entry per atom with its count):
// the atoms want counts more often than got (missing), those both have but got counts more
// often (again), and those only got has (foreign), each with the difference of the counts.
func diff(want, got []counted) (missing, again, foreign []counted) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i].less(got[j].atom):
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j].less(want[i].atom):
			foreign = append(foreign, got[j])
			j++
		default:
			w, g := want[i], got[j]
			if w.n > g.n {
				w.n -= g.n
				missing = append(missing, w)
			} else if g.n > w.n {
				g.n -= w.n
				again = append(again, g)
			}
			i++
			j++
		}
	}
	return missing, again, foreign
}

// times words a count: "twice", "3 times".
func times(n int64) string {
	if n == 2 {
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
