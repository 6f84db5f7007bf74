package msccl

// aliasOffset is where, in chunks, MSCCL buffer buf of GPU g starts inside the one buffer an
// in-place algorithm has: NCCL's in-place conventions. An in-place allgather's input is the
// rank's own part of its output, an in-place reduce_scatter's output is the rank's own part of
// its input, and every other collective's input and output are the same memory.
func aliasOffset(coll string, buf byte, g *GPU) int {
	switch {
	case coll == "allgather" && buf == 'i':
		return g.ID * g.IChunks
	case coll == "reduce_scatter" && buf == 'o':
		return g.ID * g.OChunks
	}
	return 0
}

// Postcondition is what an algorithm's collective promises about its result, in terms of the
// plan's buffers: the form of a `expect` statement (issue 16), which the planner proves.
type Postcondition struct {
	Coll string // allreduce, allgather, alltoall, reduce_scatter, reduce, broadcast
	Op   string // the reduction, "sum", for the reducing collectives; "" otherwise
	Dst  string // the buffer that holds the result
	Src  string // the buffer that held each rank's contribution
}

// postcondition maps an algorithm's coll and inplace to its postcondition; ok is false for a
// collective with no standard meaning (custom, or one coredag does not know).
//
// The front end does not emit it yet: `expect` statements are not part of the language on this
// branch. Once they are, Build appends the statement this describes.
func postcondition(a *Algo) (Postcondition, bool) {
	src, dst := BufInput, BufOutput
	if a.Inplace {
		src, dst = BufInplace, BufInplace
	}
	switch a.Coll {
	case "allreduce", "reduce_scatter", "reduce":
		return Postcondition{Coll: a.Coll, Op: "sum", Dst: dst, Src: src}, true
	case "allgather", "alltoall", "broadcast":
		return Postcondition{Coll: a.Coll, Dst: dst, Src: src}, true
	}
	return Postcondition{}, false
}
