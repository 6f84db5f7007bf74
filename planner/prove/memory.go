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

// cell is a segment as a list keeps it, without its start: that is where the segment before
// ends (0 for the first).
type cell struct {
	hi, shift int64
	sh        int32
	by        ir.OpID
}

// segList is one rank's buffer: a sorted, gap-free list of segments, kept in a gap buffer. The
// list is s[:gap] followed by s[gap+free:]; a replacement moves the gap to where it happens,
// so a plan that writes a buffer's runs in order, as a ring's steps do, moves a few segments
// per write however many the buffer has.
type segList struct {
	s         []cell
	gap, free int
}

func (l *segList) len() int { return len(l.s) - l.free }

// at returns cell i of the list.
func (l *segList) at(i int) *cell {
	if i >= l.gap {
		i += l.free
	}
	return &l.s[i]
}

// seg is c's contents over [lo, hi).
func (c *cell) seg(lo, hi int64) seg {
	return seg{lo: lo, hi: hi, shift: c.shift, sh: c.sh, by: c.by}
}

// start is where segment i of the list starts.
func (l *segList) start(i int) int64 {
	if i == 0 {
		return 0
	}
	return l.at(i - 1).hi
}

// seg returns segment i of the list.
func (l *segList) seg(i int) seg { return l.at(i).seg(l.start(i), l.at(i).hi) }

// find returns the index of the segment holding off (the list covers the whole buffer). It
// searches outward from the gap, where the last write was: a plan's accesses to a buffer
// mostly follow one another, and then find costs the log of how far they move, not of the
// list's length.
func (l *segList) find(off int64) int {
	if l.gap > 0 && l.s[l.gap-1].hi > off { // in s[:gap]: the first segment ending after off
		low := l.s[:l.gap]
		hi, step := len(low)-1, 1 // low[hi].hi > off
		for hi-step >= 0 && low[hi-step].hi > off {
			hi, step = hi-step, 2*step
		}
		lo := max(hi-step+1, 0) // low[lo-1].hi <= off, if lo > 0
		return lo + sort.Search(hi-lo, func(i int) bool { return low[lo+i].hi > off })
	}
	high := l.s[l.gap+l.free:]
	lo, step := 0, 1 // high[:lo] end at or before off
	for lo+step-1 < len(high) && high[lo+step-1].hi <= off {
		lo, step = lo+step, 2*step
	}
	hi := min(lo+step-1, len(high)-1) // high[hi].hi > off (the list covers off)
	return l.gap + lo + sort.Search(hi-lo, func(i int) bool { return high[lo+i].hi > off })
}

// replace replaces segments [i, j) of the list with v and returns how many segments it moved
// to get there (not counting a growth of the list).
func (l *segList) replace(i, j int, v []seg) (moved int) {
	// Move the gap to j: segments [i, j) end where it starts.
	if j < l.gap {
		moved = copy(l.s[j+l.free:], l.s[j:l.gap])
	} else {
		moved = copy(l.s[l.gap:], l.s[l.gap+l.free:j+l.free])
	}
	l.gap, l.free = i, l.free+j-i // drop [i, j)
	if l.free < len(v) {
		n := len(l.s) - l.free // kept
		s := make([]cell, 2*(n+len(v)))
		copy(s, l.s[:l.gap])
		tail := l.s[l.gap+l.free:]
		copy(s[len(s)-len(tail):], tail)
		l.s, l.free = s, len(s)-n
	}
	for k, x := range v {
		l.s[l.gap+k] = cell{hi: x.hi, shift: x.shift, sh: x.sh, by: x.by}
	}
	l.gap += len(v)
	l.free -= len(v)
	return moved
}

// memory is every rank's buffers as sorted, gap-free lists of segments.
type memory struct {
	sh   *shapes
	nbuf int
	bufs []segList // rank*nbuf + buf
	init []int32   // rank*nbuf + buf: the shape of element 0 of the buffer's initial contents
	run  []seg     // scratch of put

	puts, moved int // puts, and segments their replacements moved
}

func newMemory(g *ir.Graph, sh *shapes) *memory {
	n := g.Ranks * len(g.Buffers)
	m := &memory{sh: sh, nbuf: len(g.Buffers), bufs: make([]segList, n), init: make([]int32, n)}
	for r := 0; r < g.Ranks; r++ {
		for b := range g.Buffers {
			k := r*m.nbuf + b
			id, shift := sh.one(atom{kind: atomInit, rank: int32(r), buf: ir.BufID(b)})
			m.init[k] = id
			m.bufs[k] = segList{s: []cell{{hi: g.Buffers[b].Count, sh: id, shift: shift, by: ir.None}}, gap: 1}
		}
	}
	return m
}

func (m *memory) list(rank int, buf ir.BufID) *segList { return &m.bufs[rank*m.nbuf+int(buf)] }

// joins reports whether b continues a with the same contents.
func (m *memory) joins(a, b *seg) bool {
	return a.hi == b.lo && a.by == b.by && a.shift == b.shift && m.sh.equal(a.sh, b.sh)
}

// holds reports whether c and s, which meet, have the same contents.
func (m *memory) holds(c *cell, s *seg) bool {
	return c.by == s.by && c.shift == s.shift && m.sh.equal(c.sh, s.sh)
}

// get appends to out the segments of [lo, hi) on (rank, buf), clipped, moved by move (their
// offsets grow by move, their shift shrinks by it: the same elements seen move places on).
func (m *memory) get(out []seg, rank int, buf ir.BufID, lo, hi, move int64) []seg {
	l := m.list(rank, buf)
	i := l.find(lo)
	for start, n := l.start(i), l.len(); i < n && start < hi; i++ {
		c := l.at(i)
		s := c.seg(max(start, lo)+move, min(c.hi, hi)+move)
		s.shift -= move
		out = append(out, s)
		start = c.hi
	}
	return out
}

// put replaces [lo, hi) on (rank, buf) with repl (sorted, covering exactly [lo, hi)), joining
// runs that meet with the same contents.
func (m *memory) put(rank int, buf ir.BufID, lo, hi int64, repl []seg) {
	l := m.list(rank, buf)
	n := l.len()
	i := l.find(lo)
	j := i + 1 // segment i holds lo
	for j < n && l.at(j-1).hi < hi {
		j++
	}
	// Build the new run: left part, repl, right part, then join neighbours.
	run := m.run[:0]
	if start := l.start(i); start < lo {
		run = append(run, l.at(i).seg(start, lo))
	}
	run = append(run, repl...)
	if last := l.at(j - 1); last.hi > hi {
		run = append(run, last.seg(hi, last.hi))
	}
	// Join with the segments just outside the replaced range too (they meet the run).
	if i > 0 && m.holds(l.at(i-1), &run[0]) {
		i--
		run[0].lo = l.start(i)
	}
	if j < n && m.holds(l.at(j), &run[len(run)-1]) {
		run[len(run)-1].hi = l.at(j).hi
		j++
	}
	out := run[:1]
	for _, s := range run[1:] {
		if p := &out[len(out)-1]; m.joins(p, &s) {
			p.hi = s.hi
		} else {
			out = append(out, s)
		}
	}
	m.puts++
	m.moved += l.replace(i, j, out)
	m.run = run
}
