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
	ExpectUnchanged                       // every rank: Dst = Dst@rank
	ExpectBarrier                         // every rank leaves after every rank has entered
	ExpectValue                           // the general form: Dst[Lo:Hi] = Want, on Ranks
)

var expectNames = [...]string{"allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "gather", "scatter", "unchanged", "barrier", "value"}

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
	return k == ExpectReduce || k == ExpectBroadcast || k == ExpectGather || k == ExpectScatter
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

	// The general form (ExpectValue): elements [Lo, Hi) of Dst on each rank of Ranks hold Want:
	// Want[k*(Hi-Lo)+j] is element Lo+j on Ranks[k]. Text is the statement as written.
	// Given is its precondition (`if`): elements of the initial memory it assumes.
	Lo, Hi int64
	Ranks  []int
	Want   []Linear
	Given  []Given
	Text   string
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
