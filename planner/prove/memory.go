package prove

import (
	"sort"

	"github.com/coredag/coredag/ir"
)

// seg is a run [lo, hi) of one rank's buffer whose elements hold shape sh at shift (shape.go),
// last written by op by (ir.None: never written).
type seg struct {
	lo, hi int64
	shift  int64
	sh     int32
	by     ir.OpID
}

func (a *seg) joins(b *seg) bool {
	return a.hi == b.lo && a.sh == b.sh && a.shift == b.shift && a.by == b.by
}

// memory is every rank's buffers as sorted, gap-free lists of segments.
type memory struct {
	nbuf int
	bufs [][]seg // rank*nbuf + buf
	run  []seg   // scratch of put
}

func newMemory(g *ir.Graph, sh *shapes) *memory {
	m := &memory{nbuf: len(g.Buffers), bufs: make([][]seg, g.Ranks*len(g.Buffers))}
	for r := 0; r < g.Ranks; r++ {
		for b := range g.Buffers {
			id, shift := sh.one(atom{kind: atomInit, rank: int32(r), buf: ir.BufID(b)})
			m.bufs[r*m.nbuf+b] = []seg{{lo: 0, hi: g.Buffers[b].Count, sh: id, shift: shift, by: ir.None}}
		}
	}
	return m
}

func (m *memory) list(rank int, buf ir.BufID) []seg { return m.bufs[rank*m.nbuf+int(buf)] }

// find returns the index of the segment holding off (the list covers the whole buffer).
func find(segs []seg, off int64) int {
	return sort.Search(len(segs), func(i int) bool { return segs[i].hi > off })
}

// get appends to out the segments of [lo, hi) on (rank, buf), clipped, moved by move (their
// offsets grow by move, their shift shrinks by it: the same elements seen move places on).
func (m *memory) get(out []seg, rank int, buf ir.BufID, lo, hi, move int64) []seg {
	segs := m.list(rank, buf)
	for i := find(segs, lo); i < len(segs) && segs[i].lo < hi; i++ {
		s := segs[i]
		s.lo, s.hi = max(s.lo, lo)+move, min(s.hi, hi)+move
		s.shift -= move
		out = append(out, s)
	}
	return out
}

// put replaces [lo, hi) on (rank, buf) with repl (sorted, covering exactly [lo, hi)), joining
// runs that meet with the same contents.
func (m *memory) put(rank int, buf ir.BufID, lo, hi int64, repl []seg) {
	k := rank*m.nbuf + int(buf)
	segs := m.bufs[k]
	i := find(segs, lo)
	j := i
	for j < len(segs) && segs[j].lo < hi {
		j++
	}
	var mid [2]seg
	parts := mid[:0]
	if segs[i].lo < lo {
		left := segs[i]
		left.hi = lo
		parts = append(parts, left)
	}
	if last := segs[j-1]; last.hi > hi {
		last.lo = hi
		parts = append(parts, last)
	}
	// Build the new run: left part, repl, right part, then join neighbours.
	run := m.run[:0]
	if len(parts) > 0 && parts[0].hi == lo {
		run = append(run, parts[0])
		parts = parts[1:]
	}
	run = append(run, repl...)
	run = append(run, parts...)
	// Join with the segments just outside the replaced range too.
	if i > 0 && segs[i-1].joins(&run[0]) {
		i--
		run[0].lo = segs[i].lo
	}
	if j < len(segs) && run[len(run)-1].joins(&segs[j]) {
		run[len(run)-1].hi = segs[j].hi
		j++
	}
	out := run[:1]
	for _, s := range run[1:] {
		if p := &out[len(out)-1]; p.joins(&s) {
			p.hi = s.hi
		} else {
			out = append(out, s)
		}
	}
	m.bufs[k] = replace(segs, i, j, out)
	m.run = run
}

// replace is slices.Replace without the aliasing checks' cost for short replacements.
func replace(s []seg, i, j int, v []seg) []seg {
	tail := len(s) - j
	n := i + len(v) + tail
	if n > cap(s) {
		ns := make([]seg, n, n+n/2+1)
		copy(ns, s[:i])
		copy(ns[i:], v)
		copy(ns[i+len(v):], s[j:])
		return ns
	}
	if i+len(v) != j {
		s = s[:max(n, len(s))]
		copy(s[i+len(v):], s[j:j+tail])
	}
	copy(s[i:], v)
	return s[:n]
}
