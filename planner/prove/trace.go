package prove

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// Tracing a failed postcondition back to the op where it first went wrong. The last op that
// wrote a wrong element often only forwarded it (the last step of a ring); the fault is where
// the element first took a value that is no part of what it should end with. Finding it takes
// replays that watch one element (only when a proof fails): one for the wrong element, one for
// the element the faulty op read, when that is another buffer (a receive slot).

// hit is a value an op left at the watched element, the step of the replay it did so at.
type hit struct {
	op    ir.OpID
	step  int
	red   ir.ReduceOp
	atoms []counted
	whole bool
}

// watch records the values the ops leave at one element (rank, buf, off).
type watch struct {
	rank   int
	buf    ir.BufID
	off    int64
	lastBy ir.OpID
	hits   []hit
}

// see records the value at w's element after op id, the step-th of the replay, if id wrote it.
func (w *watch) see(s *State, id ir.OpID, step int) {
	y := s.mem.get(nil, w.rank, w.buf, w.off, w.off+1, 0)[0]
	if y.by == w.lastBy {
		return
	}
	w.lastBy = y.by
	red, atoms, whole := s.sh.at(y.sh, y.shift)
	w.hits = append(w.hits, hit{op: id, step: step, red: red, atoms: atoms, whole: whole})
}

// history replays the plan again and returns the values the ops left at (rank, buf, off), or
// none once ctx is cancelled.
func (s *State) history(ctx context.Context, rank int, buf ir.BufID, off int64) []hit {
	w := &watch{rank: rank, buf: buf, off: off, lastBy: ir.None}
	r := runWatching(ctx, s.g, s.o, s.limit, s.given, w)
	if r.full || r.stopped {
		return nil
	}
	return w.hits
}

// partOf reports whether a value an element holds on the way (got) can still be part of what
// it should end with (want): the same value, or part of the same reduction.
func partOf(wantRed ir.ReduceOp, want []counted, gotRed ir.ReduceOp, got []counted) bool {
	if wantRed == plain {
		return gotRed == plain && len(got) == 1 && len(want) == 1 && got[0] == want[0]
	}
	if gotRed != plain && gotRed != wantRed {
		return false
	}
	due := make(map[atom]int64, len(want))
	for _, a := range want {
		due[a.atom] = a.n
	}
	for _, a := range got {
		n, ok := due[a.atom]
		if !ok || a.n > n && !idempotent(wantRed) {
			return false
		}
	}
	return true
}

// source is the element op read to write element off of buffer buf on rank r: its rank,
// buffer and offset; false for ops that read no single element for it (atomics, lists).
func (s *State) source(op ir.OpID, r int, buf ir.BufID, off int64) (int, ir.BufID, int64, bool) {
	x := &s.g.Ops[op]
	if x.X != nil && len(x.More()) > 0 {
		return 0, 0, 0, false
	}
	switch x.Kind {
	case ir.OpReduce, ir.OpCopy, ir.OpWrite:
		if x.Dst.Buf != buf {
			return 0, 0, 0, false
		}
		return int(x.Rank), x.Src.Buf, x.Src.Off + off - x.Dst.Off, true
	case ir.OpRead:
		if x.Dst.Buf != buf {
			return 0, 0, 0, false
		}
		return s.peer(x), x.Src.Buf, x.Src.Off + off - x.Dst.Off, true
	case ir.OpSend:
		if x.Match == ir.None {
			return 0, 0, 0, false
		}
		m := &s.g.Ops[x.Match]
		if m.X != nil && len(m.More()) > 0 || m.Dst.Buf != buf {
			return 0, 0, 0, false
		}
		return int(x.Rank), x.Src.Buf, x.Src.Off + off - m.Dst.Off, true
	}
	return 0, 0, 0, false
}

// wantAt is what e asks of element off of its buffer on rank r; false when it asks nothing.
func (s *State) wantAt(e *ir.Expect, r int, off int64) (ir.ReduceOp, []counted, bool) {
	all, _ := s.sh.all(e.Red, e.Src, s.g.Ranks)
	for _, x := range s.spec(nil, e, r, all) {
		if x.lo <= off && off < x.hi {
			red, atoms, whole := s.sh.at(x.sh, x.shift)
			return red, atoms, whole
		}
	}
	return 0, nil, false
}

// maxTraceWork bounds the ops a trace replays in all (a replay per element it follows back),
// and maxTraceOps the plans it is tried on.
const (
	maxTraceWork = 1 << 22
	maxTraceOps  = 1 << 18
)

// traceBack relates to d the op where the wrong element first went wrong: following the value
// back from the element, through the ops that wrote it and the elements they read, the earliest
// op that left a value in e's buffer that is no part of what it should end with there. When
// that op read the misplaced part from a buffer of its own (a receive slot), the op that put
// it there is related too. It reports false, relating nothing, when no such op is found.
func (s *State) traceBack(ctx context.Context, d *diag.Diagnostic, e *ir.Expect, w *wrong) bool {
	g := s.g
	if len(g.Ops) > maxTraceOps {
		return false
	}
	type loc struct {
		rank int
		buf  ir.BufID
		off  int64
	}
	at := loc{w.rank, e.Dst, w.off}
	before := int(^uint(0) >> 1)
	var culprit, carrier *hit
	var culpritAt, read loc
	hops := max(maxTraceWork/max(len(g.Ops), 1), 2)
	cut := true // the walk stopped at its bound, not at a value that was right
	for range hops {
		hits := s.history(ctx, at.rank, at.buf, at.off)
		var x *hit
		if wantRed, want, ok := s.wantAt(e, at.rank, at.off); at.buf == e.Dst && ok {
			for i := range hits {
				h := &hits[i]
				if h.step >= before {
					break
				}
				if h.whole && !partOf(wantRed, want, h.red, h.atoms) {
					x = h
					break
				}
			}
			if x == nil {
				cut = false
				break // the value read there was right: the op that read it is at fault
			}
			culprit, culpritAt, carrier = x, at, nil
		} else {
			for i := range hits {
				if hits[i].step < before {
					x = &hits[i]
				}
			}
			if x == nil {
				cut = false
				break
			}
			if carrier == nil {
				carrier, read = x, at
			}
		}
		r, b, o, ok := s.source(x.op, at.rank, at.buf, at.off)
		if !ok || o < 0 || o >= g.Buffers[b].Count {
			cut = false
			break
		}
		at, before = loc{r, b, o}, x.step
	}
	if culprit == nil {
		return false
	}
	elem := fmt.Sprintf("%s[%d] on rank %d", g.Buffers[culpritAt.buf].Name, culpritAt.off, culpritAt.rank)
	first := "first goes wrong"
	if cut {
		first = fmt.Sprintf("goes wrong (as far as traced: %s back, where it was already wrong)", english.Plural(hops, "step"))
	}
	if culpritAt != (loc{w.rank, e.Dst, w.off}) {
		first = fmt.Sprintf("is wrong because %s %s", elem, first)
		elem = fmt.Sprintf("%s[%d] on rank %d", g.Buffers[e.Dst].Name, w.off, w.rank)
	}
	d.Relate(g.Ops[culprit.op].Pos, fmt.Sprintf("%s %s at %s, which leaves it holding %s",
		elem, first, g.OpString(culprit.op), s.describe(culprit.red, culprit.atoms, true, culpritAt.off)))
	if carrier != nil && carrier.step < culprit.step {
		label := fmt.Sprintf("%s read %s[%d] on rank %d, which %s had put there", g.OpString(culprit.op),
			g.Buffers[read.buf].Name, read.off, read.rank, g.OpString(carrier.op))
		if r, b, o, ok := s.source(carrier.op, read.rank, read.buf, read.off); ok {
			label += fmt.Sprintf(" from %s[%d] on rank %d", g.Buffers[b].Name, o, r)
		}
		d.Relate(g.Ops[carrier.op].Pos, label)
	}
	return true
}
