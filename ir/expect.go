package ir

import (
	"fmt"

	"github.com/coredag/coredag/diag"
)

// ExpectKind is the collective an `expect` statement promises (docs/language.md, Postconditions).
type ExpectKind uint8

// Postcondition forms.
const (
	ExpectAllreduce     ExpectKind = iota // every rank: Dst = Red over ranks q of Src@q
	ExpectReduce                          // on Root: Dst = Red over ranks q of Src@q
	ExpectBroadcast                       // every rank: Dst = Src@Root
	ExpectAllgather                       // every rank: block b of Dst = Src@b
	ExpectReduceScatter                   // rank r: block r of Dst = Red over ranks q of block r of Src@q
	ExpectAlltoall                        // rank r: block q of Dst = block r of Src@q
	ExpectGather                          // on Root: block b of Dst = Src@b
	ExpectScatter                         // rank r: Dst = block r of Src@Root
	ExpectAllgatherv                      // every rank: block q of Dst (Vec's counts, displs) = Src@q
	ExpectGatherv                         // on Root: the same
	ExpectScatterv                        // rank r: Dst = block r of Src@Root (Vec's counts, displs)
	ExpectAlltoallv                       // rank r: block q of Dst = block r of Src@q (Vec's)
	ExpectUnchanged                       // every rank: Dst = Dst@rank
	ExpectBarrier                         // every rank leaves after every rank has entered
	ExpectValue                           // the general form: Dst[Lo:Hi] = Want, on Ranks
)

var expectNames = [...]string{"allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "gather", "scatter", "allgatherv", "gatherv", "scatterv", "alltoallv", "unchanged", "barrier", "value"}

func (k ExpectKind) String() string { return expectNames[k] }

// ParseExpectKind maps a collective's name to its ExpectKind (the general form has no name).
func ParseExpectKind(s string) (ExpectKind, bool) {
	for i, n := range expectNames[:ExpectValue] {
		if n == s {
			return ExpectKind(i), true
		}
	}
	return 0, false
}

// ExpectKinds lists the names of the postcondition forms, in order (not the general form,
// which is written with ==).
func ExpectKinds() []string { return append([]string(nil), expectNames[:ExpectValue]...) }

// Reduces reports whether the form takes a reduction operator.
func (k ExpectKind) Reduces() bool {
	return k == ExpectAllreduce || k == ExpectReduce || k == ExpectReduceScatter
}

// Rooted reports whether the form takes a root.
func (k ExpectKind) Rooted() bool {
	return k == ExpectReduce || k == ExpectBroadcast || k == ExpectGather || k == ExpectScatter || k == ExpectGatherv || k == ExpectScatterv
}

// Vector reports whether the form has per-rank counts (Expect.Vec); reduce_scatter has them
// when its statement gives counts.
func (k ExpectKind) Vector() bool {
	return k == ExpectAllgatherv || k == ExpectGatherv || k == ExpectScatterv || k == ExpectAlltoallv
}

// Expect is an evaluated `expect` statement: a postcondition on the final contents of Dst, in
// terms of the initial contents of Src (`@q`: on rank q). When the statement names no source,
// Src is the form's default (Dst itself, or Dst's block of the rank for allgather and gather).
type Expect struct {
	Kind     ExpectKind
	Red      ReduceOp // the operator of allreduce, reduce and reduce_scatter
	Dst, Src BufID
	Root     int      // reduce, broadcast, gather and scatter; 0 otherwise
	SrcBlock bool     // Src is Dst's own block (allgather and gather without `from`)
	DstBlock bool     // reduce_scatter into one block: Dst has Src's elements / ranks
	Pos      diag.Pos // the statement
	Vec      *Vector  // the vector forms (and reduce_scatter with counts); nil otherwise

	// The general form (ExpectValue): elements [Lo, Hi) of Dst on each rank of Ranks hold Want:
	// Want[k*(Hi-Lo)+j] is element Lo+j on Ranks[k]. Text is the statement as written.
	// Given is its precondition (`if`): elements of the initial memory it assumes.
	Lo, Hi int64
	Ranks  []int
	Want   []Linear
	Given  []Given
	Text   string
}

// Vector is what a vector postcondition says of each rank's blocks, MPI's counts and
// displacements: each table has one element per rank (the same on every rank) or, for
// alltoallv, ranks * ranks (row r, Table[r*ranks : (r+1)*ranks], is rank r's). DstCounts and
// DstDispls divide the destination (MPI's recvcounts and displs, or rdispls), SrcCounts and
// SrcDispls the source (sendcounts and displs, or sdispls); a form has the tables it needs, and
// displacements that the statement leaves out are the blocks packed in rank order.
// Elaboration checked that they are consistent: counts and displacements not negative, blocks
// inside their buffers, the blocks of the destination disjoint, and what q sends r what r
// receives from q.
type Vector struct {
	DstCounts, DstDispls []int64
	SrcCounts, SrcDispls []int64
	Text                 string // the statement, with its root evaluated
}

// Piece is one block a vector postcondition asks of one rank: Dst[Lo:Hi] holds Src[At :
// At+Hi-Lo] as rank From started, or, when From is -1, the reduction over every rank of it.
type Piece struct {
	Lo, Hi, At int64
	From       int
}

// VecAt is element q of rank r's row of table t (the table itself when it has one row).
func VecAt(t []int64, ranks, r, q int) int64 {
	if len(t) > ranks {
		return t[r*ranks+q]
	}
	return t[q]
}

// Pieces appends to out the blocks vector postcondition e asks of rank r (none for a rank it
// says nothing about, and none of no elements).
func (e *Expect) Pieces(out []Piece, ranks, r int) []Piece {
	v := e.Vec
	add := func(lo, n, at int64, from int) {
		if n > 0 {
			out = append(out, Piece{Lo: lo, Hi: lo + n, At: at, From: from})
		}
	}
	switch e.Kind {
	case ExpectAllgatherv, ExpectGatherv:
		if e.Kind == ExpectGatherv && r != e.Root {
			break
		}
		for q := 0; q < ranks; q++ {
			lo, n := VecAt(v.DstDispls, ranks, r, q), VecAt(v.DstCounts, ranks, r, q)
			at := int64(0)
			if e.SrcBlock { // in place: q's own block of Dst, where q's displacements put it
				at = VecAt(v.DstDispls, ranks, q, q)
			}
			add(lo, n, at, q)
		}
	case ExpectScatterv:
		add(0, VecAt(v.SrcCounts, ranks, e.Root, r), VecAt(v.SrcDispls, ranks, e.Root, r), e.Root)
	case ExpectAlltoallv:
		for q := 0; q < ranks; q++ {
			add(VecAt(v.DstDispls, ranks, r, q), VecAt(v.DstCounts, ranks, r, q), VecAt(v.SrcDispls, ranks, q, r), q)
		}
	case ExpectReduceScatter: // MPI's recvcounts: the blocks of the source, packed in rank order
		at := VecAt(v.SrcDispls, ranks, r, r)
		lo := int64(0) // Dst is MPI's receive buffer
		if e.Src == e.Dst {
			lo = at // in place: the block stays where it is
		}
		add(lo, VecAt(v.DstCounts, ranks, r, r), at, -1)
	}
	return out
}

// Given is a precondition of a general expect: element Elem of Buf on Rank starts as Value
// (in the buffer's type: an integer's low bits).
type Given struct {
	Buf   BufID
	Elem  int64
	Rank  int
	Value int64
}

// GivenKey identifies a list of preconditions: expects with equal keys assume the same.
func GivenKey(gs []Given) string {
	if len(gs) == 0 {
		return ""
	}
	return fmt.Sprint(gs)
}

// Linear is a value of the general form: Const plus the sum of its terms, each an element of
// some rank's initial memory counted N times, in the arithmetic of the buffer's type.
type Linear struct {
	Const int64
	Terms []Term // sorted by (Buf, Elem, Rank), N never 0
}

// Term is element Elem of buffer Buf's initial contents on rank Rank, counted N times.
type Term struct {
	Buf  BufID
	Elem int64
	Rank int
	N    int64
}

// LinearString writes v as the language does: "counter[0]@1 + 10", "2 * data[3]@0", "7".
func (g *Graph) LinearString(v *Linear) string {
	s := ""
	for _, t := range v.Terms {
		n := t.N
		switch {
		case s == "" && n < 0:
			s, n = "-", -n
		case s != "" && n < 0:
			s, n = s+" - ", -n
		case s != "":
			s += " + "
		}
		if n != 1 {
			s += fmt.Sprintf("%d * ", n)
		}
		s += fmt.Sprintf("%s[%d]@%d", g.Buffers[t.Buf].Name, t.Elem, t.Rank)
	}
	switch {
	case s == "":
		return fmt.Sprint(v.Const)
	case v.Const > 0:
		s += fmt.Sprintf(" + %d", v.Const)
	case v.Const < 0:
		s += fmt.Sprintf(" - %d", uint64(-v.Const))
	}
	return s
}

// ExpectString writes a postcondition as the language does, with its root evaluated:
// "expect gather all from mine root 0".
func (g *Graph) ExpectString(e *Expect) string {
	if e.Kind == ExpectValue {
		return e.Text
	}
	if e.Kind == ExpectBarrier {
		return "expect barrier"
	}
	if e.Vec != nil {
		return e.Vec.Text
	}
	s := "expect " + e.Kind.String()
	if e.Kind.Reduces() {
		s += " " + e.Red.String()
	}
	s += " " + g.Buffers[e.Dst].Name
	if e.Src != e.Dst || e.Kind == ExpectAlltoall || e.Kind == ExpectScatter {
		s += " from " + g.Buffers[e.Src].Name
	}
	if e.Kind.Rooted() {
		s += fmt.Sprintf(" root %d", e.Root)
	}
	return s
}
