// Package prove is the pass that proves a plan's postconditions (`expect` statements): for
// every input, every element of the promised buffer on every rank ends holding what the
// collective says, as the reduction (or copy) of exactly the right initial elements.
//
// It replays the elaborated ir.Graph symbolically, in a topological order of its
// happens-before events (verify.CheckOrder). A plan that passed verify is race-free, so every
// such order leaves the same memory, and the replay computes it. Memory is kept as runs of
// elements that hold the same symbolic value up to a displacement (shape.go, memory.go), never
// element by element: the proof's cost grows with the number of ops and runs, not with the
// number of elements. Reductions are taken to be associative and commutative (a sum is the
// multiset of what it adds, whatever the order of the adds); float rounding is not modelled.
package prove

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/verify"
)

// Options are the settings of the proof. The zero value is what coredag check does without
// --mem.
type Options struct {
	// Budget, when its Bytes are positive, is the memory budget of the command: the proof takes
	// at most half of it (the rest is the Graph's and the checks' beside it) for its symbolic
	// values. A zero budget: DefaultMem.
	Budget budget.Budget
}

// replayPoll is how many ops a replay applies between two looks at its context: a millisecond
// or so, more when ops move many runs of memory.
const replayPoll = 1 << 12

// DefaultMem is what the proof may hold for its symbolic values when it is given no budget.
const DefaultMem = budget.Fallback / 2

// limit is what the proof's symbolic values may take under opt.
func (opt Options) limit() int64 {
	if opt.Budget.Bytes > 0 {
		return opt.Budget.Bytes / 2
	}
	return DefaultMem
}

// Check proves g's postconditions, replaying its ops in order o (from verify.CheckOrder on g).
// It returns one diagnostic per postcondition that does not hold, at its `expect` statement.
// A plan whose values do not fit in opt's budget, such as a long chain of reduces each adding
// another element (live values that grow with the square of the ops), gets a diagnostic at
// each postcondition saying that it cannot be proven within the budget, never a proof.
//
// Once ctx is cancelled the proof stops (its replays look at it every replayPoll ops) and Check
// returns nothing, which means nothing: the caller looks at ctx before using the result (as
// planner.Load does).
func Check(ctx context.Context, g *ir.Graph, o *verify.Order, opt Options) (errs diag.List) {
	if len(g.Expects) == 0 {
		return nil
	}
	defer func() {
		if stop.Cause(ctx) != nil {
			errs = nil // what a stopped proof found means nothing (a barrier's search stops too)
		}
	}()
	limit := opt.limit()
	states := map[string]*State{} // one replay per precondition (most plans: one, with none)
	for i := range g.Expects {
		e := &g.Expects[i]
		if e.Kind == ir.ExpectBarrier {
			if d := barrier(ctx, g, o, e); d != nil {
				errs = append(errs, d)
			}
			continue
		}
		key := ir.GivenKey(e.Given)
		s := states[key]
		if s == nil {
			s = run(ctx, g, o, limit, e.Given)
			states[key] = s
		}
		if s.stopped {
			return nil
		}
		if s.full {
			errs = append(errs, diag.Errorf(diag.Limit, e.Pos, "%s: cannot prove within the memory budget: the proof's symbolic values need more than %s%s",
				g.ExpectString(e), budget.Format(limit), budgetSource(opt.Budget)))
			continue
		}
		var d *diag.Diagnostic
		if e.Kind == ir.ExpectValue {
			d = s.checkValue(e)
		} else {
			d = s.check(ctx, e)
		}
		if d != nil {
			errs = append(errs, d)
		}
	}
	errs.Sort()
	return errs
}

// budgetSource says where the proof's limit came from.
func budgetSource(b budget.Budget) string {
	if b.Bytes <= 0 {
		return ", the most it takes without a budget"
	}
	return fmt.Sprintf(", half the memory budget of %s (%s)", budget.Format(b.Bytes), b.Source())
}

// State is the symbolic final memory of a plan.
type State struct {
	g   *ir.Graph
	sh  *shapes
	mem *memory

	a, b, out []seg      // scratch
	pieces    []ir.Piece // scratch of spec
	touched   int64      // what Run loads ahead (unused: it keeps the loads from being optimised away)

	// The shapes are collected (collect) once the table holds more than next terms; full
	// reports that the values did not fit in the proof's memory and the replay stopped.
	next int
	full bool
	peak int // the most terms the table held (at a collection, or at the end)

	// The replay was stopped part way (its context): the memory is not the plan's.
	stopped bool

	watch *watch // the element whose history a failed proof traces (trace.go), or nil

	// What the replay was run with, for the replays that trace a failure.
	o     *verify.Order
	limit int64
	given []ir.Given
}

// Run replays g's ops in order o and returns the final memory, within opt's budget, for a
// look at what the proof holds (Check is the pass). Once ctx is cancelled the replay stops.
func Run(ctx context.Context, g *ir.Graph, o *verify.Order, opt Options) *State {
	return run(ctx, g, o, opt.limit(), nil)
}

// termBytes is what one term costs the proof: the term, and room for the table to grow and to
// be copied when it is collected.
const termBytes = 2 * int64(unsafe.Sizeof(term{}))

// run replays g's ops in order o from an initial memory where the elements of given hold their
// values (the others, anything) and returns the final memory; the shapes' terms may take up to
// limit bytes (termBytes each), past which it stops, with s.full set. Once ctx is cancelled it
// stops too, with s.stopped set.
func run(ctx context.Context, g *ir.Graph, o *verify.Order, limit int64, given []ir.Given) *State {
	return runWatching(ctx, g, o, limit, given, nil)
}

// runWatching is run that records in w (unless nil) the values each op leaves at w's element.
func runWatching(ctx context.Context, g *ir.Graph, o *verify.Order, limit int64, given []ir.Given, w *watch) *State {
	// Each reduce and atomic makes about one shape, as does each rank's buffer at the start and
	// each postcondition (check's value over all ranks).
	ops, makers := inOrder(g, o)
	maxTerms := int(min(limit/termBytes, math.MaxInt32))
	n := g.Ranks*len(g.Buffers) + len(g.Expects) + makers + len(given)
	if 2*int64(n) > int64(maxTerms) {
		return &State{g: g, full: true}
	}
	s := &State{g: g, sh: newShapes(n), watch: w, o: o, limit: limit, given: given}
	s.sh.maxTerms = maxTerms
	s.next = max(cap(s.sh.terms), 1<<16)
	s.mem = newMemory(g, s.sh)
	for _, x := range given {
		id, shift := s.sh.one(atom{kind: atomConst, v: x.Value})
		s.mem.put(x.Rank, x.Buf, x.Elem, x.Elem+1, []seg{{lo: x.Elem, hi: x.Elem + 1, sh: id, shift: shift, by: ir.None}})
	}
	// The order goes round the ranks (a wave of events on every rank, then the next), so each
	// op is far in g.Ops from the one before and its loads miss the cache. Loading the op
	// replayed a few steps on while replaying this one overlaps the misses.
	const ahead = 8
	var touched int64
	poll := stop.Every(ctx, replayPoll)
	for k, id := range ops {
		if poll.Step() != nil {
			s.stopped = true
			break
		}
		if k+ahead < len(ops) {
			touched ^= touch(&g.Ops[ops[k+ahead]])
		}
		s.apply(id)
		if w := s.watch; w != nil {
			w.see(s, id, k)
		}
		if len(s.sh.terms) > s.next || s.sh.full {
			s.collect()
			if s.full {
				break
			}
		}
	}
	s.touched = touched
	s.peak = max(s.peak, len(s.sh.terms))
	return s
}

// collect drops the shapes no run of memory holds any more, which a chain of reduces leaves
// behind at every step, and sets when to collect next: when the table has doubled. It sets
// s.full when what is left, doubled, does not fit.
func (s *State) collect() {
	if s.sh.full {
		s.full = true
		return
	}
	s.peak = max(s.peak, len(s.sh.terms))
	m := s.mem
	ids := make([]int32, 0, len(m.init))
	ids = append(ids, m.init...)
	for i := range m.bufs {
		l := &m.bufs[i]
		for k := range l.s {
			if k < l.gap || k >= l.gap+l.free {
				ids = append(ids, l.s[k].sh)
			}
		}
	}
	s.sh.keep(ids)
	copy(m.init, ids)
	at := len(m.init)
	for i := range m.bufs {
		l := &m.bufs[i]
		for k := range l.s {
			if k < l.gap || k >= l.gap+l.free {
				l.s[k].sh = ids[at]
				at++
			}
		}
	}
	live := len(s.sh.terms)
	s.next = max(2*live, 1<<16)
	s.full = s.next > s.sh.maxTerms
}

// touch loads the cache lines of op that apply reads and returns a value that depends on the
// loads. An Op (88 bytes) spans up to 3 lines; X, Dst.Off and Kind (at 8, 48 and 80 bytes, less
// than 64 apart) are on every one of them but one holding only its Site or its last bytes.
func touch(op *ir.Op) int64 {
	v := op.Dst.Off ^ int64(op.Kind)
	if op.X != nil {
		v++
	}
	return v
}

// inOrder returns the ops that take effect, in the order of the events at which they do, and
// how many of them are reduces and atomics. An op takes effect at one event inside the interval
// of every access it makes (see verify's accesses): a data-moving op at its landing, a host op
// at its start. Positions are distinct, below 3 per op: a counting sort over a bitmap of them
// orders the ops in linear time with a few bits per position and per op.
func inOrder(g *ir.Graph, o *verify.Order) (ops []ir.OpID, makers int) {
	used := make([]uint64, (3*len(g.Ops)+63)/64)  // by position
	atStart := make([]uint64, (len(g.Ops)+63)/64) // by op: takes effect at its start
	atLand := make([]uint64, len(atStart))        // or at its landing
	k := 0
	for i := range g.Ops {
		id := ir.OpID(i)
		var p int32
		switch kind := g.Ops[i].Kind; kind {
		case ir.OpRecv, ir.OpNop, ir.OpWait:
			continue
		case ir.OpReduce, ir.OpCopy:
			p = o.Start(id)
			atStart[i/64] |= 1 << (i % 64)
			if kind == ir.OpReduce {
				makers++
			}
		default:
			p = o.Land(id)
			atLand[i/64] |= 1 << (i % 64)
			if kind.IsAtomic() {
				makers++
			}
		}
		used[p/64] |= 1 << (p % 64)
		k++
	}
	before := make([]int32, len(used)) // ops with positions in the words before
	sum := 0
	for w, word := range used {
		before[w] = int32(sum)
		sum += bits.OnesCount64(word)
	}
	out := make([]ir.OpID, k)
	for w := range atStart {
		for set := atStart[w] | atLand[w]; set != 0; set &= set - 1 {
			b := bits.TrailingZeros64(set)
			id := ir.OpID(w*64 + b)
			var p int32
			if atStart[w]&(1<<b) != 0 {
				p = o.Start(id)
			} else {
				p = o.Land(id)
			}
			out[int(before[p/64])+bits.OnesCount64(used[p/64]&(1<<(p%64)-1))] = id
		}
	}
	return out, makers
}

// apply replays op id.
func (s *State) apply(id ir.OpID) {
	g := s.g
	op := &g.Ops[id]
	own := int(op.Rank)
	switch op.Kind {
	case ir.OpSend:
		if op.Match == ir.None || !op.Src.Valid() {
			return
		}
		r := &g.Ops[op.Match]
		s.copyList(op.Match, own, op, int(r.Rank), r)
	case ir.OpWrite:
		s.copyList(id, own, op, s.peer(op), op)
	case ir.OpRead:
		s.copyList(id, s.peer(op), op, own, op)
	case ir.OpCopy:
		s.copy(id, own, op.Src, own, op.Dst)
	case ir.OpReduce:
		s.reduce(id, own, op.Dst, op.Src, op.Red)
	case ir.OpAtomicAdd, ir.OpAtomicCAS:
		s.atomic(id, own, s.peer(op))
	}
}

// peer is the rank at the other end of op's queue (its own rank without one).
func (s *State) peer(op *ir.Op) int {
	if op.Queue == ir.None {
		return int(op.Rank)
	}
	return s.g.Queues[op.Queue].PeerRank
}

// copyList moves the gather list of from (its Src side) on rank sr into the scatter list of to
// (its Dst side) on rank dr (the bytes in list order), as written by op by.
func (s *State) copyList(by ir.OpID, sr int, from *ir.Op, dr int, to *ir.Op) {
	a, b := from.Src, to.Dst
	if from.X == nil && to.X == nil && a.Valid() && b.Valid() &&
		s.g.Buffers[a.Buf].Type.Size() == s.g.Buffers[b.Buf].Type.Size() {
		s.copy(by, sr, a, dr, b) // one slice each side, elements alike: the pieces are the pair
		return
	}
	s.g.Pieces(from.SrcSegs(), to.DstSegs(), func(a, b ir.Slice) { s.copy(by, sr, a, dr, b) })
}

// copy moves src on rank sr to dst on rank dr, as written by op by.
func (s *State) copy(by ir.OpID, sr int, src ir.Slice, dr int, dst ir.Slice) {
	n := min(src.Len, dst.Len)
	if n <= 0 {
		return
	}
	s.a = s.mem.get(s.a[:0], sr, src.Buf, src.Off, src.Off+n, dst.Off-src.Off)
	for i := range s.a {
		s.a[i].by = by
	}
	s.mem.put(dr, dst.Buf, dst.Off, dst.Off+n, s.a)
}

// reduce replays `reduce red dst from src` on rank r.
func (s *State) reduce(by ir.OpID, r int, dst, src ir.Slice, red ir.ReduceOp) {
	n := min(src.Len, dst.Len)
	if n <= 0 {
		return
	}
	s.a = s.mem.get(s.a[:0], r, dst.Buf, dst.Off, dst.Off+n, 0)
	s.b = s.mem.get(s.b[:0], r, src.Buf, src.Off, src.Off+n, dst.Off-src.Off)
	s.out = s.out[:0]
	i, j := 0, 0
	lo := dst.Off
	for i < len(s.a) && j < len(s.b) {
		x, y := &s.a[i], &s.b[j]
		hi := min(x.hi, y.hi)
		id, shift := s.sh.merge(x.sh, x.shift, y.sh, y.shift, red, by, r)
		s.out = append(s.out, seg{lo: lo, hi: hi, sh: id, shift: shift, by: by})
		lo = hi
		if x.hi == hi {
			i++
		}
		if y.hi == hi {
			j++
		}
	}
	s.mem.put(r, dst.Buf, dst.Off, dst.Off+n, s.out)
}

// atomic replays an atomic add or compare-and-swap of rank r on its peer p: the fetch gets the
// old value; an add leaves the sum with its addend. A cas that finds a known value (a
// constant: a precondition's, or one a cas left, or their sums with addends) swaps or not as
// the hardware would; one that finds another leaves a value that depends on the values.
func (s *State) atomic(by ir.OpID, r, p int) {
	op := &s.g.Ops[by]
	dst := op.Dst
	if !dst.Valid() || dst.Len <= 0 {
		return
	}
	s.a = s.mem.get(s.a[:0], p, dst.Buf, dst.Off, dst.Off+dst.Len, 0)
	if op.Fetch().Valid() {
		n := min(dst.Len, op.Fetch().Len)
		s.b = s.mem.get(s.b[:0], p, dst.Buf, dst.Off, dst.Off+n, op.Fetch().Off-dst.Off)
		for i := range s.b {
			s.b[i].by = by
		}
		s.mem.put(r, op.Fetch().Buf, op.Fetch().Off, op.Fetch().Off+n, s.b)
	}
	s.out = s.out[:0]
	for _, x := range s.a {
		var id int32
		var shift int64
		w := by
		if op.Kind == ir.OpAtomicAdd {
			c, cs := s.sh.one(atom{kind: atomConst, v: op.A()})
			id, shift = s.sh.merge(x.sh, x.shift, c, cs, ir.RedSum, by, r)
		} else if v, ok := s.constant(x); !ok {
			id, shift = s.sh.one(atom{kind: atomOpaque, rank: int32(r), v: int64(by)})
		} else if v == op.A() { // a known value: the swap happens, or not
			id, shift = s.sh.one(atom{kind: atomConst, v: op.B()})
		} else {
			id, shift, w = x.sh, x.shift, x.by
		}
		s.out = append(s.out, seg{lo: x.lo, hi: x.hi, sh: id, shift: shift, by: w})
	}
	s.mem.put(p, dst.Buf, dst.Off, dst.Off+dst.Len, s.out)
}
