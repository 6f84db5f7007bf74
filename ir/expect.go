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
)

var expectNames = [...]string{"allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "gather", "scatter", "unchanged"}

func (k ExpectKind) String() string { return expectNames[k] }

// ParseExpectKind maps a collective's name to its ExpectKind.
func ParseExpectKind(s string) (ExpectKind, bool) {
	for i, n := range expectNames {
		if n == s {
			return ExpectKind(i), true
		}
	}
	return 0, false
}

// ExpectKinds lists the names of the postcondition forms, in order.
func ExpectKinds() []string { return append([]string(nil), expectNames[:]...) }

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
	Pos      diag.Pos // the statement
}

// ExpectString writes a postcondition as the language does, with its root evaluated:
// "expect gather all from mine root 0".
func (g *Graph) ExpectString(e *Expect) string {
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
