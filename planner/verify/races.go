package verify

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/internal/view"
	"github.com/coredag/coredag/ir"
)

// AccessKind says how an access touches memory.
type AccessKind uint8

// Access kinds. Two accesses conflict unless both read, or both are commuting atomic adds.
const (
	AccessRead  AccessKind = iota
	AccessWrite            // includes read-modify-write (reduce, cas, fetching atomics)
	AccessAdd              // atomic add without `to`: commutes with other AccessAdd
)

func (k AccessKind) String() string { return [...]string{"read", "write", "add"}[k] }

// MemAccess is one op's access to a range of one rank's memory. It happens somewhere in the interval
// of happens-before events [from, to] (docs/language.md §8, What a plan means).
type MemAccess struct {
	Op       ir.OpID
	Rank     int // whose memory: the op's rank, or its queue's peer for remote accesses
	Buf      ir.BufID
	Off, Len int64 // elements
	Kind     AccessKind
	Pos      diag.Pos // the slice in the source (the op statement if the slice has no position)

	from, to event
}

// access is the form of a MemAccess the race sweep works on: 16 bytes rather than 64, as a plan
// has about as many as ops. The range and the position are read from the op's slice (slice,
// memAccess); the rank and the buffer are those of the sweep's group (placedAccess). It holds no
// pointers: the accesses live in a view of an array of int32s (collectAccesses).
type access struct {
	op       ir.OpID
	from, to event
	kind     AccessKind
	slot     slot
}

// placedAccess is an access and the memory it touches: whose (the op's rank, or its queue's peer
// for remote accesses) and which buffer.
type placedAccess struct {
	access
	rank int32
	buf  ir.BufID
}

// slice is the op's slice that access a touches.
func (a *access) slice(g *ir.Graph) *ir.Slice {
	op := &g.Ops[a.op]
	switch a.slot {
	case slotSrc:
		return &op.Src
	case slotDst:
		return &op.Dst
	case slotFetch:
		return &op.X.Fetch
	}
	return &op.X.More[a.slot-slotMore]
}

// slot is which slice of its op an access touches.
type slot uint8

// The slots are the ir.Parts.
const (
	slotSrc   = slot(ir.PartSrc)
	slotDst   = slot(ir.PartDst)
	slotFetch = slot(ir.PartFetch)
	slotMore  = slot(ir.PartMore) // slotMore+k: segment k of a scatter/gather list's More (ir.MaxListSegs bounds k)
)

// refShift makes room in a ref for every slot: ir.MaxListSegs-1 list segments after the three
// slices, and ops (at most elaborate.MaxOps, 2^22) still fit an int32.
const refShift = 5

// ref names an access by its op and slot (an op touches each of its slices at most once), so
// that it can be found again once the sweep's accesses are gone.
func (a *access) ref() int32 { return int32(a.op)<<refShift | int32(a.slot) }

// conflicts reports whether a and b touch memory in ways whose order matters.
func (a *access) conflicts(b *access) bool {
	return a.kind != b.kind || a.kind == AccessWrite
}

// memAccess is the MemAccess of access ref.
func memAccess(g *ir.Graph, ref int32) MemAccess {
	id := ir.OpID(ref >> refShift)
	var buf [2]placedAccess
	for _, a := range accesses(g, id, buf[:0]) {
		if int32(a.slot) == ref&(1<<refShift-1) {
			s := a.slice(g)
			pos := g.PartPos(id, ir.Part(a.slot))
			return MemAccess{Op: id, Rank: int(a.rank), Buf: a.buf, Off: s.Off, Len: s.Len, Kind: a.kind, Pos: pos, from: a.from, to: a.to}
		}
	}
	panic("verify: no access for ref")
}

// accesses appends op id's memory accesses to out (two, plus one per further segment of a
// scatter/gather list, which has the interval of its first segment). This is the one place that knows, for each
// kind of op, which slices it reads and writes, on which rank, and when.
//
//	kind            access                            rank   interval
//	send            read Src                          own    [start, land]
//	recv            write Dst                         own    [land, land] of the matching send
//	write           read Src, write Dst               own, peer  [start, land]
//	read            read Src                          peer   [start, land]
//	                write Dst                         own    [land, end]
//	atomic add      add Dst (write if it fetches)     peer   [land, land]
//	atomic cas      write Dst                         peer   [land, land]
//	atomic          write Fetch                       own    [land, end]
//	reduce          read Src, write Dst               own    [start, end]
//	copy            read Src, write Dst               own    [start, end]
func accesses(g *ir.Graph, id ir.OpID, out []placedAccess) []placedAccess {
	op := &g.Ops[id]
	own, peer := int(op.Rank), int(op.Rank)
	if op.Queue != ir.None {
		peer = g.Queues[op.Queue].PeerRank
	}
	start, land, end := startOf(id), landOf(id), endOf(id)
	add := func(sl slot, s ir.Slice, rank int, kind AccessKind, from, to event) {
		if !s.Valid() || s.Len <= 0 {
			return
		}
		a := access{op: id, kind: kind, slot: sl, from: from, to: to}
		out = append(out, placedAccess{a, int32(rank), s.Buf})
	}
	more := func(rank int, kind AccessKind, from, to event) {
		for k, s := range op.More() {
			add(slotMore+slot(k), s, rank, kind, from, to)
		}
	}
	switch op.Kind {
	case ir.OpSend:
		add(slotSrc, op.Src, own, AccessRead, start, land)
		more(own, AccessRead, start, land)
	case ir.OpRecv:
		if op.Match != ir.None {
			l := landOf(op.Match)
			add(slotDst, op.Dst, own, AccessWrite, l, l)
			more(own, AccessWrite, l, l)
		} else {
			add(slotDst, op.Dst, own, AccessWrite, start, end)
			more(own, AccessWrite, start, end)
		}
	case ir.OpWrite:
		add(slotSrc, op.Src, own, AccessRead, start, land)
		more(own, AccessRead, start, land)
		add(slotDst, op.Dst, peer, AccessWrite, start, land)
	case ir.OpRead:
		add(slotSrc, op.Src, peer, AccessRead, start, land)
		add(slotDst, op.Dst, own, AccessWrite, land, end)
		more(own, AccessWrite, land, end)
	case ir.OpAtomicAdd, ir.OpAtomicCAS:
		kind := AccessWrite
		if op.Kind == ir.OpAtomicAdd && !op.Fetch().Valid() {
			kind = AccessAdd
		}
		add(slotDst, op.Dst, peer, kind, land, land)
		add(slotFetch, op.Fetch(), own, AccessWrite, land, end)
	case ir.OpReduce, ir.OpCopy:
		add(slotSrc, op.Src, own, AccessRead, start, end)
		add(slotDst, op.Dst, own, AccessWrite, start, end)
	}
	return out
}

// Race is a pair of conflicting accesses to the same elements of one rank's memory, neither of
// which happens before the other. First is the one that can start earlier.
type Race struct {
	First, Second MemAccess
	Off, Len      int64 // the elements both touch
}

// Rank is the rank whose memory the race is on.
func (r Race) Rank() int { return r.First.Rank }

// Buf is the buffer the race is on.
func (r Race) Buf() ir.BufID { return r.First.Buf }

// Races returns every race of g, one per pair of op instances and buffer, sorted by rank, buffer
// and offset. A Graph whose happens-before relation has a cycle (see Verify) has no meaningful
// races, and Races returns nil for it. Stopped (ctx), it returns part of them, or none.
func Races(ctx context.Context, g *ir.Graph) []Race {
	if len(g.Ops) == 0 {
		return nil
	}
	h := newHB(ctx, g, true, &Options{})
	if !h.acyclic {
		return nil
	}
	return findRacesOn(ctx, g, h, 0, nil, nil)
}

// Budgets of the bounded searches: a check that would search further is answered exactly, with
// the others like it, by hbGraph.resolve; a read-set pruning question that would search further
// is answered "no", which only keeps one more read in the set. The checks that hold have short
// paths (within a rank, or to a neighbour: a few events); the ones that give up are mostly long
// paths around a ring, which every visit spent before giving up only makes dearer (in the ring
// allreduce, about one in three checks: 64 visits cost three times the searches that succeed).
const (
	checkBudget = 16
	pruneBudget = 64
)

// raceFinder sweeps the accesses of each (rank, buffer) in topological order of their starts,
// keeping per elementary segment of the buffer the last write and the reads and commuting adds
// since it (each as an antichain). A new access is checked only against that state: if all
// checks pass, every earlier conflicting access is ordered before it by transitivity, so the
// sweep finds a race on every segment that has one while asking few reachability questions.
// The (rank, buffer) groups are independent: runs of them are swept on all CPUs (sweeper), and
// what they find is put together in group order, so the result does not depend on the CPUs.
type raceFinder struct {
	g     *ir.Graph
	h     *hbGraph
	acc   []access    // the sweep's accesses, dropped before the deferred queries are answered
	words []int32     // their array
	col   *collection // the accesses when collected beforehand (CheckDeadlocks)

	found map[[2]int32]bool
	races [][2]int32 // refs of racing access pairs, in the order found
}

// sweeper sweeps a run of (rank, buffer) groups with its own search scratch.
type sweeper struct {
	f *raceFinder
	s search
	// The deferred queries, in chunks of deferChunk, so that growing copies nothing: their
	// events, dropped once the queries are split (resolve), and the refs of their accesses.
	deferred [][][2]event
	refs     [][][2]int32
	ndefer   int
	found    map[[2]int32]bool
	races    [][2]int32
	checked  []int32 // earlier accesses already checked against the current one

	// poll counts the sweep's work and looks at the context every sweepPoll of it: once it is
	// cancelled, the sweep goes no further.
	poll stop.Poll
}

// A deferred query is a check that reach gave up on: does access p end before access a starts
// (events x and y)? p and a are refs.

// deferChunk is how many deferred queries one chunk holds (128 KiB of events and of refs).
const deferChunk = 1 << 14

// deferredAt returns the events of deferred query i.
func (w *sweeper) deferredAt(i int) [2]event { return w.deferred[i/deferChunk][i%deferChunk] }

// refsAt returns the refs of deferred query i.
func (w *sweeper) refsAt(i int) [2]int32 { return w.refs[i/deferChunk][i%deferChunk] }

type segState struct {
	last  int32
	reads []int32
	adds  []int32
}

// minShard is the fewest accesses worth a sweeper of their own.
const minShard = 1 << 15

// findRacesOn finds the races of g, whose happens-before graph is h, with at most workers
// sweepers (0: one per CPU, for runs of at least minShard accesses), on the accesses col if
// they were collected beforehand (else nil). Unless nil, serial is called if the search comes
// to steps that run on one goroutine. Stopped (ctx), it returns part of the races, or none.
func findRacesOn(ctx context.Context, g *ir.Graph, h *hbGraph, workers int, col *collection, serial func()) []Race {
	f := &raceFinder{g: g, h: h, found: map[[2]int32]bool{}, col: col}
	sw := f.sweep(ctx, workers, serial)
	if stop.Cause(ctx) != nil { // the sweep stopped part way: nothing it found counts
		return nil
	}
	// The sweep's accesses and search scratch are not needed to answer the deferred queries,
	// which builds large indexes of its own: only the refs of the pairs are kept. The array of
	// the accesses can hold the renumbered adjacency.
	f.acc = nil
	if f.h.owner {
		f.h.pos.offer(f.words)
	}
	f.words = nil
	n := 0
	for _, w := range sw {
		w.s = search{}
		for _, k := range w.races {
			f.race(k[0], k[1])
		}
		n += w.ndefer
	}
	// Deferred query i is sweeper w's i - base[w], for the last w with base[w] <= i.
	base := make([]int, len(sw))
	for w := 1; w < len(sw); w++ {
		base[w] = base[w-1] + sw[w-1].ndefer
	}
	at := func(i int) (*sweeper, int) {
		w, _ := slices.BinarySearch(base, i+1)
		return sw[w-1], i - base[w-1]
	}
	ans := f.h.resolve(ctx, n, func(i int) hbQuery {
		w, j := at(i)
		d := w.deferredAt(j)
		return hbQuery{x: d[0], y: d[1]}
	}, func() {
		for _, w := range sw {
			w.deferred = nil // split, the queries need only their refs
		}
		if serial != nil {
			serial()
		}
	})
	if stop.Cause(ctx) != nil { // unanswered questions would read as races
		return nil
	}
	for i, ok := range ans {
		if !ok {
			w, j := at(i)
			r := w.refsAt(j)
			f.race(r[0], r[1])
		}
	}
	return f.collect()
}

// sweep collects the accesses and sweeps them, (rank, buffer) by (rank, buffer), in runs of
// groups, one per worker. It returns the sweepers in the order of their runs. Unless nil, serial
// is called if the sweep is one run. The sweepers stop part way once ctx is cancelled.
func (f *raceFinder) sweep(ctx context.Context, workers int, serial func()) []*sweeper {
	var groups []group
	c := f.col
	if c == nil {
		c = collectAccesses(ctx, f.g, len(f.h.succ), f.h.opt.workerCount(len(f.g.Ops), 1), f.h.opt)
	}
	f.col = nil
	c.sortGroups(f.h.topo, f.h.opt)
	f.acc, f.words, groups = c.acc, c.words, c.groups
	if workers == 0 {
		workers = max(1, min(runtime.GOMAXPROCS(0), len(f.acc)/minShard))
	}
	workers = min(workers, max(len(groups), 1))
	var runs [][]group
	for lo, done := 0, 0; lo < len(groups); {
		// The next run takes groups until it holds its share of the accesses left.
		share := (len(f.acc) - done) / (workers - len(runs))
		hi, size := lo, 0
		for hi < len(groups) && (size < share || hi == lo) {
			size += int(groups[hi].end - groups[hi].start)
			hi++
		}
		if len(runs) == workers-1 {
			hi = len(groups)
		}
		runs = append(runs, groups[lo:hi])
		lo = hi
		done += size
	}
	if len(runs) <= 1 && serial != nil {
		serial()
	}
	sw := make([]*sweeper, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		sw[i] = &sweeper{f: f, found: map[[2]int32]bool{}, poll: stop.Every(ctx, sweepPoll)}
		wg.Go(func() { sw[i].sweep(run) })
	}
	wg.Wait()
	return sw
}

// group is the accesses f.acc[start:end] to the memory of one (rank, buffer).
type group struct{ start, end int32 }

// sweep sweeps the given (rank, buffer) groups. It stops early when the checks are stopped
// (w.poll).
func (w *sweeper) sweep(groups []group) {
	g, acc := w.f.g, w.f.acc
	var states []segState
	var ends []int64 // the bounds of each access of the group, read from its op once
	var bounds segIndex
	for _, grp := range groups {
		if w.poll.Add(int(grp.end-grp.start)+1) != nil {
			return
		}
		bounds.reset()
		ends = ends[:0]
		for a := grp.start; a < grp.end; a++ {
			s := acc[a].slice(g)
			ends = append(ends, s.Off, s.Off+s.Len)
			bounds.add(s.Off)
			bounds.add(s.Off + s.Len)
		}
		nseg := bounds.number() - 1
		for len(states) < nseg {
			states = append(states, segState{})
		}
		for s := 0; s < nseg; s++ {
			states[s] = segState{last: -1, reads: states[s].reads[:0], adds: states[s].adds[:0]}
		}
		for a := grp.start; a < grp.end; a++ {
			k := 2 * (a - grp.start)
			lo, hi := bounds.index(ends[k]), bounds.index(ends[k+1])
			w.checked = w.checked[:0]
			for s := lo; s < hi; s++ {
				w.visit(&states[s], a)
			}
			if w.poll.Add(int(hi-lo)) != nil {
				return
			}
		}
	}
}

// sweepPoll is how much work a sweeper does between two looks at the context (sweeper.poll):
// a unit is an access, a segment it visits or a search of the graph (at most pruneBudget events),
// so that a sweep looks every millisecond or so even where an access checks many earlier ones
// (a buffer many sends read: every read stays in the segment's antichain).
const sweepPoll = 1 << 12

// segIndex numbers the distinct bounds of a group's slices in order, which cut its memory into
// elementary segments: a hash table from a bound to its number. A group has many accesses to few
// segments (a chunk each), and its table stays in cache where a sort of every bound and a
// binary search per access would not.
type segIndex struct {
	slots []segSlot
	shift uint    // 64 - log2(len(slots))
	epoch uint32  // a slot of another epoch is empty
	vals  []int64 // the distinct bounds, in order once numbered
}

type segSlot struct {
	val   int64
	epoch uint32
	num   int32
}

// reset empties the table.
func (x *segIndex) reset() {
	if x.slots == nil {
		x.slots, x.shift = make([]segSlot, 1<<10), 64-10
	}
	x.epoch++
	if x.epoch == 0 { // wrapped: forget all slots
		clear(x.slots)
		x.epoch = 1
	}
	x.vals = x.vals[:0]
}

// slot is where bound v is, or would go.
func (x *segIndex) slot(v int64) *segSlot {
	mask := len(x.slots) - 1
	for i := int(uint64(v) * 0x9e3779b97f4a7c15 >> x.shift); ; i = (i + 1) & mask {
		if s := &x.slots[i]; s.epoch != x.epoch || s.val == v {
			return s
		}
	}
}

// add adds bound v.
func (x *segIndex) add(v int64) {
	if s := x.slot(v); s.epoch != x.epoch {
		*s = segSlot{val: v, epoch: x.epoch}
		x.vals = append(x.vals, v)
		if 2*len(x.vals) > len(x.slots) {
			x.slots, x.shift = make([]segSlot, 2*len(x.slots)), x.shift-1
			x.epoch = 1
			for _, v := range x.vals {
				*x.slot(v) = segSlot{val: v, epoch: 1}
			}
		}
	}
}

// number numbers the bounds in order and returns how many there are.
func (x *segIndex) number() int {
	slices.Sort(x.vals)
	for i, v := range x.vals {
		x.slot(v).num = int32(i)
	}
	return len(x.vals)
}

// index is the number of bound v.
func (x *segIndex) index(v int64) int32 { return x.slot(v).num }

// collection is the accesses of a graph grouped by (rank, buffer), each group in op order.
type collection struct {
	words  []int32  // the array of acc
	acc    []access // a view of words
	groups []group
}

// collectAccesses collects the accesses of g grouped by (rank, buffer), with a counting sort in
// two passes over the ops (counting, then placing each access), which keeps them in op order.
// The ops are split into parts, at most the given number, each on a goroutine of its own and
// counting its accesses per group; part i places its accesses of a group after those of the
// parts before it, so the order is op order whatever the split. The array of the accesses has
// room for the given number of int32s besides (posGraph.offer). Stopped (ctx), it returns part
// of the accesses, or none.
func collectAccesses(ctx context.Context, g *ir.Graph, room, parts int, opt *Options) *collection {
	c := &collection{}
	nbuf := len(g.Buffers)
	ngroups := g.Ranks * nbuf
	if ngroups == 0 {
		return c
	}
	key := func(a *placedAccess) int { return int(a.rank)*nbuf + int(a.buf) }
	// A part's counts are as many as the groups: parts of fewer ops than that would count more
	// than they place.
	parts = min(parts, opt.workerCount(len(g.Ops), max(minSortPart, 4*ngroups)))
	// at[p][k] is where part p places its next access of group k: first its count.
	at := make([][]int32, parts)
	forParts(parts, len(g.Ops), func(p, lo, hi int) {
		count := make([]int32, ngroups)
		at[p] = count
		var one []placedAccess
		poll := stop.Every(ctx, hbPoll)
		for i := lo; i < hi; i++ {
			if poll.Step() != nil {
				return
			}
			one = accesses(g, ir.OpID(i), one[:0])
			for k := range one {
				count[key(&one[k])]++
			}
		}
	})
	if stop.Cause(ctx) != nil { // the caller stops too: an empty collection
		return c
	}
	start := cursors(at, ngroups)
	c.words = make([]int32, max(view.Len[access, int32](int(start[ngroups])), room))
	c.acc = view.As[access](c.words, int(start[ngroups]))
	forParts(parts, len(g.Ops), func(p, lo, hi int) {
		next := at[p]
		var one []placedAccess
		poll := stop.Every(ctx, hbPoll)
		for i := lo; i < hi; i++ {
			if poll.Step() != nil {
				return
			}
			one = accesses(g, ir.OpID(i), one[:0])
			for k := range one {
				a := &one[k]
				c.acc[next[key(a)]] = a.access
				next[key(a)]++
			}
		}
	})
	for k := range ngroups {
		if start[k] < start[k+1] {
			c.groups = append(c.groups, group{start[k], start[k+1]})
		}
	}
	return c
}

// sortGroups sorts each group by topological position of the accesses' first events, on all
// CPUs. A group's accesses are mostly one rank's, whose op order is close to topological, so the
// sorts have little to do, and they read the accesses of one group rather than all of them.
func (c *collection) sortGroups(topo []int32, opt *Options) {
	opt.inParts(len(c.groups), minSortGroups, func(_, lo, hi int) {
		var keys []uint64
		var tmp []access
		for _, gr := range c.groups[lo:hi] {
			grp := c.acc[gr.start:gr.end]
			// Sorted by key: the position of the first event, then the place in the group,
			// which keeps two accesses of one op (with one first event) in their order.
			keys = keys[:0]
			sorted := true
			for i := range grp {
				keys = append(keys, uint64(topo[grp[i].from])<<32|uint64(i))
				sorted = sorted && (i == 0 || keys[i] > keys[i-1])
			}
			if sorted {
				continue
			}
			slices.Sort(keys)
			tmp = append(tmp[:0], grp...)
			for i, key := range keys {
				grp[i] = tmp[uint32(key)]
			}
		}
	})
}

// minSortPart is the fewest ops worth a goroutine of collectAccesses; minSortGroups the fewest
// groups.
const (
	minSortPart   = 1 << 14
	minSortGroups = 16
)

// visit applies access a to the state of one segment.
func (w *sweeper) visit(st *segState, a int32) {
	ac := &w.f.acc[a]
	if st.last >= 0 {
		w.check(st.last, a)
	}
	if ac.kind != AccessRead {
		for _, r := range st.reads {
			w.check(r, a)
		}
	}
	if ac.kind != AccessAdd {
		for _, r := range st.adds {
			w.check(r, a)
		}
	}
	switch ac.kind {
	case AccessWrite:
		st.last = a
		st.reads = st.reads[:0]
		st.adds = st.adds[:0]
	case AccessRead:
		st.reads = w.insert(st.reads, a)
	case AccessAdd:
		st.adds = w.insert(st.adds, a)
	}
}

// insert adds a to an antichain, dropping the members that happen before it (a later conflicting
// access ordered after a is then ordered after them too).
func (w *sweeper) insert(set []int32, a int32) []int32 {
	acc := w.f.acc
	from := acc[a].from
	out := set[:0]
	for i, r := range set {
		if r == a {
			return set
		}
		if w.poll.Step() != nil { // a set as large as the group: stop part way
			return append(out, set[i:]...)
		}
		if w.f.h.reach(&w.s, acc[r].to, from, pruneBudget) != reachYes {
			out = append(out, r)
		}
	}
	return append(out, a)
}

// check asks whether earlier access p is ordered before a, recording a race or a deferred query.
func (w *sweeper) check(p, a int32) {
	pa, aa := &w.f.acc[p], &w.f.acc[a]
	if pa.op == aa.op || !pa.conflicts(aa) {
		return
	}
	for _, c := range w.checked {
		if c == p {
			return
		}
	}
	w.checked = append(w.checked, p)
	w.poll.Step() // once stopped, the sweep stops after this access
	switch w.f.h.reach(&w.s, pa.to, aa.from, checkBudget) {
	case reachNo:
		if k := [2]int32{pa.ref(), aa.ref()}; !w.found[k] {
			w.found[k] = true
			w.races = append(w.races, k)
		}
	case reachUnknown:
		if w.ndefer%deferChunk == 0 {
			w.deferred = append(w.deferred, make([][2]event, 0, deferChunk))
			w.refs = append(w.refs, make([][2]int32, 0, deferChunk))
		}
		k := len(w.deferred) - 1
		w.deferred[k] = append(w.deferred[k], [2]event{pa.to, aa.from})
		w.refs[k] = append(w.refs[k], [2]int32{pa.ref(), aa.ref()})
		w.ndefer++
	}
}

// race records the race between the accesses with refs p and a.
func (f *raceFinder) race(p, a int32) {
	k := [2]int32{p, a}
	if !f.found[k] {
		f.found[k] = true
		f.races = append(f.races, k)
	}
}

// collect merges the racing access pairs into one Race per pair of ops and buffer.
func (f *raceFinder) collect() []Race {
	type key struct {
		a, b ir.OpID
		rank int
		buf  ir.BufID
	}
	index := map[key]int{}
	var out []Race
	for _, pr := range f.races {
		a, b := memAccess(f.g, pr[0]), memAccess(f.g, pr[1])
		lo, hi := max(a.Off, b.Off), min(a.Off+a.Len, b.Off+b.Len)
		k := key{a.Op, b.Op, a.Rank, a.Buf}
		if i, ok := index[k]; ok {
			r := &out[i]
			nlo, nhi := min(r.Off, lo), max(r.Off+r.Len, hi)
			r.Off, r.Len = nlo, nhi-nlo
			continue
		}
		index[k] = len(out)
		out = append(out, Race{First: a, Second: b, Off: lo, Len: hi - lo})
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := &out[i], &out[j]
		if x.First.Rank != y.First.Rank {
			return x.First.Rank < y.First.Rank
		}
		if x.First.Buf != y.First.Buf {
			return x.First.Buf < y.First.Buf
		}
		if x.Off != y.Off {
			return x.Off < y.Off
		}
		if x.First.Op != y.First.Op {
			return x.First.Op < y.First.Op
		}
		return x.Second.Op < y.Second.Op
	})
	return out
}

// Fix is a missing ordering that would remove a race: `Op after After`, both ops on Rank.
type Fix struct {
	Rank      int
	Op, After ir.OpID
}

// Format writes the fix as an instruction: "add `red[1] after ag[0]` on rank 2".
func (f Fix) Format(g *ir.Graph) string {
	return fmt.Sprintf("add `%s after %s` on rank %d", g.Ops[f.Op].Name, g.Ops[f.After].Name, f.Rank)
}

// ExplainRaces returns, for each race on its own, the `after` edge that would fix it: one edge
// `y after x` on one rank such that the first access ends before x and y starts before the
// second, closing no cycle, the one with the shortest such path first (see fixes.go); ok false
// when there is none. Between two ops of one rank, the one declared first is assumed to be
// meant to go first. Each edge fixes its race alone; SuggestFixes proves edges that fix them
// all together. Stopped (ctx), the search gives up: what it returns then means nothing.
func ExplainRaces(ctx context.Context, g *ir.Graph, races []Race) (fixes []Fix, ok []bool) {
	if len(races) == 0 {
		return nil, nil
	}
	fixes, ok = make([]Fix, len(races)), make([]bool, len(races))
	s := newFixGraph(ctx, g, ir.OrderNone, nil)
	if s == nil {
		return fixes, ok
	}
	for i, r := range races {
		s.setAdded(nil)
		set, found := s.pick(r)
		if !found {
			continue
		}
		// Of the edge's copies on every rank, the one of the rank whose memory it is, or of
		// the rank of either op.
		fixes[i], ok[i] = set[0], true
		for _, want := range []int{int(g.Ops[r.Second.Op].Rank), int(g.Ops[r.First.Op].Rank), r.Rank()} {
			for _, f := range set {
				if f.Rank == want {
					fixes[i] = f
				}
			}
		}
	}
	return fixes, ok
}

// raceErrors turns races, the races of g under its happens-before graph h, into diagnostics,
// one per pair of op statements and buffer, naming the ranks whose memory it occurs in, each
// with the `after` edges that fix its races on every one of them (explainRaces). Unless nil,
// note gives what to add to a race's message.
func raceErrors(ctx context.Context, g *ir.Graph, h *hbGraph, races []Race, note func(Race) string) diag.List {
	var groups diag.Group
	var firsts []*diag.Diagnostic
	byKind := map[string]int{}
	var members [][]Race
	for _, r := range races {
		a, b := inSource(g, r)
		kind := raceKind(g, r)
		d := raceError(g, r, a, b)
		if note != nil {
			d.Msg += note(r)
		}
		if groups.Add(d, kind, r.Rank()) {
			byKind[kind] = len(firsts)
			firsts = append(firsts, d)
			members = append(members, nil)
		}
		k := byKind[kind]
		members[k] = append(members[k], r)
	}
	explainRaces(ctx, g, h.order, h.opt, firsts, members)
	return groups.List(g.Ranks)
}

// inSource returns the accesses of race r in the order of their positions in the source.
func inSource(g *ir.Graph, r Race) (a, b MemAccess) {
	a, b = r.First, r.Second
	if b.Pos.Before(a.Pos) || b.Pos == a.Pos && g.Ops[b.Op].Pos.Before(g.Ops[a.Op].Pos) {
		a, b = b, a
	}
	return a, b
}

// raceKind names the diagnostic race r is reported in: its pair of op statements and buffer.
func raceKind(g *ir.Graph, r Race) string {
	a, b := inSource(g, r)
	return fmt.Sprintf("race %s %s %d", g.Ops[a.Op].Pos, g.Ops[b.Op].Pos, r.Buf())
}

// raceError words race r between accesses a and b (a written first) for its rank, without the
// fix (explainRaces).
func raceError(g *ir.Graph, r Race, a, b MemAccess) *diag.Diagnostic {
	where := fmt.Sprintf("rank %d's %s", r.Rank(), g.SliceString(ir.Slice{Buf: r.Buf(), Off: r.Off, Len: r.Len}))
	d := diag.Errorf(diag.Race, a.Pos,
		"race on %s: %s %s it, and %s %s it; neither is ordered before the other, so the result depends on timing",
		where, describeOp(g, a.Op), accessVerb(g, a), describeOp(g, b.Op), accessVerb(g, b))
	d.Relate(b.Pos, fmt.Sprintf("%s %s it", describeOp(g, b.Op), accessVerb(g, b)))
	return d
}

// explainRaces completes each diagnostic ds[i] with the `after` edges that fix every race of
// members[i] (its races on every rank) under the ordering ord, found by the search of fixes.go
// and proven by adding them to the plan and running the deadlock and race passes again; when it
// finds none, the diagnostic says so and what else could order the accesses.
func explainRaces(ctx context.Context, g *ir.Graph, ord ir.Order, opt *Options, ds []*diag.Diagnostic, members [][]Race) {
	s := newFixGraph(ctx, g, ord, opt)
	for i, d := range ds {
		if stop.Cause(ctx) != nil { // the diagnostics mean nothing now
			return
		}
		races := members[i]
		if s == nil || s.spent() {
			d.Msg += " (no `after` suggested: proving one would take more than the search budget)"
			continue
		}
		fixes, open := s.fixGroup(ctx, races, ord, opt)
		if s.spent() {
			d.Msg += " (no `after` suggested: proving one would take more than the search budget)"
			continue
		}
		if len(fixes) == 0 {
			r := races[0] // the search may leave none open when the races involve waits
			if len(open) > 0 {
				r = open[0]
			}
			d.Msg += " (" + unorderableHint(g, r) + ")"
			continue
		}
		hint := formatFixes(g, fixes)
		d.Fix = &diag.Fix{Msg: hint}
		if len(open) > 0 {
			var ranks []int
			for _, r := range open {
				ranks = append(ranks, r.Rank())
			}
			hint += fmt.Sprintf(", which fixes it except on %s: there, %s", diag.FormatRanks(ranks), unorderableHint(g, open[0]))
		}
		d.Msg += " (" + hint + ")"
	}
}

// unorderableHint says that no `after` edge fixes race r, and what can order its two ops. Ops
// of different ranks cannot be ordered by `after`, which orders ops of one rank, unless a
// message already carries the order: a new message can (and atomic adds that fetch nothing
// commute, so they need no order at all).
func unorderableHint(g *ir.Graph, r Race) string {
	a, b := &g.Ops[r.First.Op], &g.Ops[r.Second.Op]
	if a.Rank == b.Rank {
		return "no single `after` edge fixes this race without a deadlock: use another buffer for one of the two accesses, or order them through other ops"
	}
	hint := fmt.Sprintf("no single `after` edge fixes this race, as no message orders these ranks' ops: pass a token (rank %d sends to rank %d after %s, and %s on rank %d is `after` the recv of it)",
		a.Rank, b.Rank, a.Name, b.Name, b.Rank)
	if a.Kind == ir.OpAtomicAdd && b.Kind == ir.OpAtomicAdd {
		hint += ", or drop the `to` of the adds if their old values are not needed: adds that fetch nothing commute and do not race"
	}
	return hint
}

func describeOp(g *ir.Graph, id ir.OpID) string {
	op := &g.Ops[id]
	return fmt.Sprintf("%s %s on rank %d", op.Kind, op.Name, op.Rank)
}

func accessVerb(g *ir.Graph, a MemAccess) string {
	op := &g.Ops[a.Op]
	switch {
	case a.Kind == AccessRead:
		return "reads"
	case a.Kind == AccessAdd:
		return "atomically adds to"
	case op.Kind.IsAtomic() && a.from != a.to: // the local copy of the old value
		return "fetches into"
	case op.Kind == ir.OpAtomicCAS:
		return "compares and swaps"
	case op.Kind == ir.OpAtomicAdd:
		return "fetches and adds to"
	case op.Kind == ir.OpRecv:
		return "receives into"
	case op.Kind == ir.OpReduce:
		return "reduces into"
	}
	return "writes"
}
