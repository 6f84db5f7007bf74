package elaborate

import (
	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate/internal/arena"
)

// allocs is where an elaborator's allocations come from, beside the Graph's arrays: the
// tactics of package arena, and scratch reused from one statement to the next. None of it is
// a rule of the language. Each worker of a parallel elaboration has its own (forWorker).
type allocs struct {
	// Indexed names already made ("tx[3]"), so that every rank's op of the same name shares
	// one string: SPMD ranks name their ops alike. At most maxInterned; the zero value: none.
	names arena.Interner
	sites arena.Memo[siteKey, *ir.Site] // the Sites of names past what the name tables keep (site)

	siteChunk arena.Chunk[ir.Site]    // where Sites come from
	extras    arena.Chunk[ir.OpExtra] // where OpExtras come from (extra)
	scopes    arena.Free[scope]       // scope layers free for child

	segs   []ir.Slice  // scratch of sliceList
	segPos []diag.Pos  // scratch of sliceList: where each of segs was written
	after  []evaluated // scratch of dep
}

// maxInterned bounds the names interned, and the Sites kept past the name tables: names that
// differ per rank are made anew past it.
const maxInterned = 1 << 16

func newAllocs() allocs {
	return allocs{names: arena.NewInterner(maxInterned), sites: arena.NewMemo[siteKey, *ir.Site](maxInterned)}
}

// forWorker returns the allocs of a worker of a parallel elaboration: it starts with the
// names interned so far, and nothing else of a.
func (a *allocs) forWorker() allocs {
	w := newAllocs()
	w.names = a.names.Clone()
	return w
}

// touchOp writes to op, in room just allocated, for arena.Prefault: Rank, not the whole Op,
// whose pointer fields' write barriers would read the page first.
func touchOp(op *ir.Op) { op.Rank = 0 }
