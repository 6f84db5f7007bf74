package msccl

// aliasOffset is where, in chunks, MSCCL buffer buf of GPU g starts inside the plan buffer it
// maps to. In place (NCCL's in-place conventions): an allgather's input is the rank's own part
// of its output, a reduce_scatter's output is the rank's own part of its input, and every other
// collective's input and output are the same memory. Out of place, a reduce_scatter's output
// (one block) is block `rank` of the plan's `output`, which has the input's size, so that
// `expect reduce_scatter` can state it; every other buffer starts at 0.
func aliasOffset(a *Algo, buf byte, g *GPU) int {
	switch {
	case a.Coll == "allgather" && buf == 'i' && a.Inplace:
		return g.ID * g.IChunks
	case a.Coll == "reduce_scatter" && buf == 'o':
		return g.ID * g.OChunks
	}
	return 0
}

// Postcondition is what an algorithm's collective promises about its result, in terms of the
// plan's buffers: the fields of an `expect` statement, which `check` proves.
type Postcondition struct {
	Coll string // allreduce, allgather, alltoall, reduce_scatter, reduce, broadcast
	Op   string // the reduction, "sum", for the reducing collectives; "" otherwise
	Dst  string // the buffer that holds the result
	Src  string // the buffer that held each rank's contribution; "" for Dst itself
	Root int    // reduce and broadcast: the <algo>'s root attribute; -1 otherwise
}

// postcondition maps an algorithm's coll, inplace and root to its postcondition; ok is false for
// a collective with no standard meaning (custom, or one coredag does not know), and for reduce
// and broadcast without a root attribute (MSCCL passes the root at call time).
func postcondition(a *Algo) (Postcondition, bool) {
	p := Postcondition{Coll: a.Coll, Dst: BufOutput, Src: BufInput, Root: -1}
	if a.Inplace {
		// Without `from` the source is the destination as it started (for allgather: its
		// own block), which is what an in-place collective reads.
		p.Dst, p.Src = BufInplace, ""
		if a.Coll == "alltoall" {
			p.Src = BufInplace // alltoall names its source always
		}
	}
	switch a.Coll {
	case "allreduce", "reduce_scatter":
		p.Op = "sum"
	case "allgather", "alltoall":
	case "reduce", "broadcast":
		if a.Root < 0 {
			return Postcondition{}, false
		}
		p.Root = a.Root
		if a.Coll == "reduce" {
			p.Op = "sum"
		}
	default:
		return Postcondition{}, false
	}
	return p, true
}
