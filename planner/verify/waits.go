package verify

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// The orders that wait ops make (docs/language.md, Waiting for landings). A wait completes once
// the writes that landed in its region (or the atomic adds that landed on its word) weigh its
// threshold: one per write, the addend per add. It says which landed only as far as every set of
// landings that could satisfy it agrees: the landing of c happens before the end of wait w when
// every set of contributions that weighs the threshold and can exist when w ends holds c. A set
// that leaves c out must also leave out whatever lands only after c has (a set of landings is
// closed under happens-before), and what lands only after w has ended; so c is required when
//
//	weight(contributors of w other than c, neither landing after c nor after the end of w) < threshold
//
// The orders so found add happens-before, which can make more contributors required: the
// search repeats until nothing changes. A wait whose contributors that can land before it ends
// do not weigh its threshold never completes: a deadlock, reported at the wait.
//
// The orders are found without any ordering between the ops of a queue (ir.OrderNone): what a
// wait proves holds on every transport.

// waiter is a wait op with its contributors. Its weights are unsigned: a word's adds are
// positive, and may bring it from the bottom of its type to the top (newWaiter refuses a word
// that they can take past it), which takes all of the 64 bits.
type waiter struct {
	op     ir.OpID
	need   uint64    // the weight that completes it: writes, or how far the word must grow
	from   []ir.OpID // the writes or adds that count
	weight []uint64  // their weights
	word   bool      // a word's value, rather than a count of writes
	total  uint64    // the weight of all of from
	start  uint64    // where a word starts: its 8 bytes, read as its type says (ir.WordString)
}

// resolveWaits computes g.Lands when g has wait ops and they are not known yet, or reports why
// a wait can never complete, or why its word is not one a wait can watch. Stopped (ctx), it
// returns nothing and leaves g.Lands unset.
func resolveWaits(ctx context.Context, g *ir.Graph) diag.List {
	if g.Lands != nil {
		return nil
	}
	var ws []*waiter
	var groups diag.Group
	var ix *landIndex
	poll := stop.Every(ctx, waitPoll)
	for i := range g.Ops {
		if poll.Add(1+ix.takeWork()) != nil {
			return nil
		}
		if g.Ops[i].Kind == ir.OpWait {
			if ix == nil {
				ix = newLandIndex(g)
			}
			w, ds := newWaiter(g, ix, ir.OpID(i))
			for _, d := range ds {
				groups.Add(d, "wait", int(g.Ops[i].Rank))
			}
			if w != nil {
				ws = append(ws, w)
			}
		}
	}
	if groups.Len() > 0 {
		errs := groups.List(g.Ranks)
		errs.Sort()
		return errs
	}
	if len(ws) == 0 {
		return nil
	}
	lands := []ir.Edge{}
	have := map[[2]ir.OpID]bool{}
	for {
		adj := newWaitAdj(g, lands)
		grew := false
		for _, w := range ws {
			if stop.Cause(ctx) != nil { // each wait searches the graph: as long as the plan
				return nil
			}
			after := adj.from(endOf(w.op), &adj.after) // what happens only after w has ended
			// What can land before w ends: at most w.total, which newWaiter keeps within 64 bits.
			var can uint64
			for k, c := range w.from {
				if !after[landOf(c)] {
					can += w.weight[k]
				}
			}
			if can < w.need {
				groups.Add(unreachable(g, w, can), "wait", int(g.Ops[w.op].Rank))
				continue
			}
			for k, c := range w.from {
				if after[landOf(c)] || have[[2]ir.OpID{c, w.op}] {
					continue
				}
				required := can-w.weight[k] < w.need
				if !required {
					later := adj.from(landOf(c), &adj.later)
					rest := can - w.weight[k]
					for j, d := range w.from {
						if j != k && !after[landOf(d)] && later[landOf(d)] {
							rest -= w.weight[j]
						}
					}
					required = rest < w.need
				}
				if required {
					have[[2]ir.OpID{c, w.op}] = true
					lands = append(lands, ir.Edge{From: c, To: w.op, Pos: g.Ops[w.op].Pos})
					grew = true
				}
			}
		}
		if groups.Len() > 0 {
			errs := groups.List(g.Ranks)
			errs.Sort()
			return errs
		}
		if !grew {
			break
		}
	}
	slices.SortFunc(lands, func(a, b ir.Edge) int {
		if a.To != b.To {
			return int(a.To - b.To)
		}
		return int(a.From - b.From)
	})
	g.Lands = lands
	return nil
}

// unreachable is the deadlock of a wait whose contributors that can land before it ends weigh
// only can.
func unreachable(g *ir.Graph, w *waiter, can uint64) *diag.Diagnostic {
	op := &g.Ops[w.op]
	at := g.PartPos(w.op, ir.PartDst)
	if w.word {
		t := g.Buffers[op.Dst.Buf].Type
		value, start := ir.WordString(t, uint64(op.A())), ir.WordString(t, w.start)
		if w.total < w.need {
			return diag.Errorf(diag.Deadlock, at, "wait %s waits for %s to reach %s, but it starts at %s and the atomic adds to it bring %d in all: it can never complete (wait for less, or add the missing adds)",
				g.OpString(w.op), g.SliceString(op.Dst), value, start, w.total)
		}
		return diag.Errorf(diag.Deadlock, at, "deadlock: wait %s waits for %s to reach %s, but it starts at %s and the atomic adds that can land before the wait ends bring only %d: the others land only after it (through `after`, queue order or matching)",
			g.OpString(w.op), g.SliceString(op.Dst), value, start, can)
	}
	if w.total < w.need {
		land := "land"
		if w.total == 1 {
			land = "lands"
		}
		return diag.Errorf(diag.Deadlock, at, "wait %s waits for %s to %s, but only %d %s there: it can never complete (wait for fewer, or add the missing writes)",
			g.OpString(w.op), writes(w.need), g.SliceString(op.Dst), w.total, land)
	}
	return diag.Errorf(diag.Deadlock, at, "deadlock: wait %s waits for %s to %s, but only %d of the %s that land there can land before the wait ends: the others land only after it (through `after`, queue order or matching)",
		g.OpString(w.op), writes(w.need), g.SliceString(op.Dst), can, writes(w.total))
}

// writes is "1 write" or "N writes".
func writes(n uint64) string {
	if n == 1 {
		return "1 write"
	}
	return fmt.Sprintf("%d writes", n)
}

// waitPoll is how much work resolveWaits does, finding the contributors of the waits, between
// two looks at its context (ops gone through, and nodes of landIndex visited): a millisecond or
// so.
const waitPoll = 1 << 14

// newWaiter finds the contributors of wait id, or reports a word that a wait cannot watch. It
// looks only at the ops that ix finds may land in the wait's region or write its word.
func newWaiter(g *ir.Graph, ix *landIndex, id ir.OpID) (*waiter, diag.List) {
	op := &g.Ops[id]
	w := &waiter{op: id, need: uint64(op.A()), word: op.WaitsWord()} // a count is at least 1
	r, region := int(op.Rank), op.Dst
	var errs diag.List
	overlaps := func(s ir.Slice) bool {
		return s.Valid() && s.Overlaps(region)
	}
	bad := func(x ir.OpID, what string) {
		d := diag.Errorf(diag.Shape, g.PartPos(id, ir.PartDst), "wait %s watches %s, which %s %s: a wait's word may change only by atomic adds of positive values, so that its value only grows",
			g.OpString(id), g.SliceString(region), g.Ops[x].Name, what)
		d.Relate(g.Ops[x].Pos, fmt.Sprintf("%s %s", g.Ops[x].Kind, g.Ops[x].Name))
		errs = append(errs, d)
	}
	for _, xid := range ix.find(r, region, w.word) {
		x := &g.Ops[xid]
		if x.Kind.OnQueue() && landRank(g, x) == r {
			switch {
			case x.Kind == ir.OpWrite && w.word && overlaps(x.Dst):
				bad(xid, "a write changes")
				continue
			case x.Kind == ir.OpWrite && overlaps(x.Dst) && !x.Dst.Within(region):
				d := diag.Errorf(diag.Shape, g.PartPos(xid, ir.PartDst), "write %s lands in %s, partly outside the region %s that wait %s counts: a write counts whole, so it must land inside the region or outside it",
					g.OpString(xid), g.SliceString(x.Dst), g.SliceString(region), g.OpString(id))
				d.Relate(op.Pos, "wait "+op.Name)
				errs = append(errs, d)
				continue
			case x.Kind == ir.OpAtomicAdd && w.word && overlaps(x.Dst) && x.A() <= 0:
				bad(xid, fmt.Sprintf("adds %d to", x.A()))
				continue
			case x.Kind == ir.OpAtomicCAS && w.word && overlaps(x.Dst):
				bad(xid, "a compare-and-swap changes")
				continue
			}
			if v := g.LandWeight(xid, r, region, w.word); v > 0 {
				w.from, w.weight = append(w.from, xid), append(w.weight, uint64(v))
			}
		}
		if w.word && int(x.Rank) == r {
			for _, s := range localWrites(x) {
				if overlaps(s) {
					bad(xid, "writes")
				}
			}
		}
	}
	var carry uint64 // the total, past 64 bits: only the adds of a word can get there
	for _, v := range w.weight {
		var c uint64
		w.total, c = bits.Add64(w.total, v, 0)
		carry += c
	}
	if w.word && len(errs) == 0 {
		start, err := wordStart(g, r, region)
		if err != "" {
			errs = append(errs, diag.Errorf(diag.Shape, g.PartPos(id, ir.PartDst), "wait %s watches %s, %s", g.OpString(id), g.SliceString(region), err))
		}
		// The word only grows if its adds cannot take it past the largest value of its type:
		// an add past it wraps around to the smallest (the NIC's adds are modulo 2^64), and a
		// wait whose threshold was reached sees it fall back below.
		b := &g.Buffers[region.Buf]
		from := ir.WordLevel(b.Type, start)
		if _, c := bits.Add64(from, w.total, 0); err == "" && (c != 0 || carry != 0) {
			d := diag.Errorf(diag.Shape, g.PartPos(id, ir.PartDst), "wait %s watches %s, which starts at %s and to which the atomic adds bring %s in all: past %s, the largest %s, it wraps around, so its value does not only grow (start it lower, or add less)",
				g.OpString(id), g.SliceString(region), ir.WordString(b.Type, start), bigSum(w.weight), ir.WordString(b.Type, ir.WordTop(b.Type)), b.Type)
			d.Relate(b.Pos, "buffer "+b.Name)
			errs = append(errs, d)
		}
		w.start = start
		if to := ir.WordLevel(b.Type, uint64(op.A())); to > from {
			w.need = to - from
		} else { // reached from the start: nothing to wait for
			w.need, w.from, w.weight = 0, nil, nil
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return w, nil
}

// landRank is the rank where the data of op x, on a queue, lands.
func landRank(g *ir.Graph, x *ir.Op) int {
	if x.Queue == ir.None {
		return int(x.Rank)
	}
	return g.Queues[x.Queue].PeerRank
}

// landIndex finds, for newWaiter, the ops that may matter to a wait among all of the plan's,
// so that it need not go through every op for each wait (n waits for n writes took n^2 steps):
// the writes and atomics by the rank and buffer they land in, and, when some wait watches a
// word, the local writes (localWrites) by their rank and buffer; each (rank, buffer) has its
// slices in a spanTree. newWaiter acts on no other op: of the ops on a queue, it weighs or
// refuses only writes and atomics (a send's data lands through the recv that takes it, a local
// write of the recv's rank).
type landIndex struct {
	remote, local map[rankBuf]*spanTree // local only when some wait watches a word
	found         []ir.OpID             // find's result, until its next call
	stack         []int32               // find's scratch
	work          int                   // the tree nodes find visited, since takeWork
}

// rankBuf is a buffer of a rank.
type rankBuf struct {
	rank int
	buf  ir.BufID
}

func newLandIndex(g *ir.Graph) *landIndex {
	type span struct {
		off, end int64
		op       ir.OpID
	}
	remote := map[rankBuf][]span{}
	var local map[rankBuf][]span
	for i := range g.Ops {
		if g.Ops[i].WaitsWord() {
			local = map[rankBuf][]span{}
			break
		}
	}
	for i := range g.Ops {
		x := &g.Ops[i]
		switch x.Kind {
		case ir.OpWrite, ir.OpAtomicAdd, ir.OpAtomicCAS:
			if x.Dst.Valid() {
				k := rankBuf{landRank(g, x), x.Dst.Buf}
				remote[k] = append(remote[k], span{x.Dst.Off, x.Dst.Off + x.Dst.Len, ir.OpID(i)})
			}
		}
		if local != nil {
			for _, s := range localWrites(x) {
				if s.Valid() {
					k := rankBuf{int(x.Rank), s.Buf}
					local[k] = append(local[k], span{s.Off, s.Off + s.Len, ir.OpID(i)})
				}
			}
		}
	}
	trees := func(m map[rankBuf][]span) map[rankBuf]*spanTree {
		if m == nil {
			return nil
		}
		ts := make(map[rankBuf]*spanTree, len(m))
		for k, spans := range m {
			slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.off, b.off) })
			t := &spanTree{off: make([]int64, len(spans)), op: make([]ir.OpID, len(spans))}
			leaves := 1
			for leaves < len(spans) {
				leaves *= 2
			}
			t.top = make([]int64, 2*leaves)
			for j := range t.top[leaves:] {
				t.top[leaves+j] = math.MinInt64
			}
			for j, sp := range spans {
				t.off[j], t.op[j], t.top[leaves+j] = sp.off, sp.op, sp.end
			}
			for j := leaves - 1; j > 0; j-- {
				t.top[j] = max(t.top[2*j], t.top[2*j+1])
			}
			ts[k] = t
		}
		return ts
	}
	return &landIndex{remote: trees(remote), local: trees(local)}
}

// spanTree is the slices of one buffer of a rank that ops write, as closed spans [off, end]
// sorted by off: leaf j of a complete binary tree (node k has children 2k and 2k + 1, the root
// is node 1, the leaves are the last half) holds span j, and top holds the largest end under
// each node, so that the spans that meet a region are found by going down only where some do.
type spanTree struct {
	off []int64   // the spans' starts, sorted
	op  []ir.OpID // the op of each span
	top []int64   // the largest end under each node: the end of a leaf's span, MinInt64 past the last
}

// find returns the ops of spans that meet the closed span of region on rank r: those that land
// there and, for a word (local), those that write it on r; sorted, each once. Closed, the spans
// that meet include those of the slices that overlap the region and those wholly inside it,
// empty ones at its edges too (ir.Slice.Within). The result is ix's, until the next call.
func (ix *landIndex) find(r int, region ir.Slice, local bool) []ir.OpID {
	ix.found = ix.found[:0]
	k := rankBuf{r, region.Buf}
	ix.meet(ix.remote[k], region.Off, region.Off+region.Len)
	if local {
		ix.meet(ix.local[k], region.Off, region.Off+region.Len)
	}
	slices.Sort(ix.found)
	ix.found = slices.Compact(ix.found)
	return ix.found
}

// meet adds to ix.found the ops of the spans of t that meet [lo, hi]: those that start at or
// before hi (a prefix of the sorted spans) and end at or after lo.
func (ix *landIndex) meet(t *spanTree, lo, hi int64) {
	if t == nil {
		return
	}
	n, _ := slices.BinarySearch(t.off, hi+1) // spans [0, n) start at or before hi
	leaves := int32(len(t.top) / 2)
	ix.stack = append(ix.stack[:0], 1)
	for len(ix.stack) > 0 {
		k := ix.stack[len(ix.stack)-1]
		ix.stack = ix.stack[:len(ix.stack)-1]
		ix.work++
		if t.top[k] < lo {
			continue
		}
		// The first leaf under k: k shifted left down to the leaves' depth.
		first := k << (bits.Len32(uint32(leaves)) - bits.Len32(uint32(k)))
		if int(first-leaves) >= n {
			continue
		}
		if k >= leaves {
			ix.found = append(ix.found, t.op[k-leaves])
			continue
		}
		ix.stack = append(ix.stack, 2*k+1, 2*k)
	}
}

// takeWork returns the work of ix's lookups since the last call (0 for a nil ix), for a poll.
func (ix *landIndex) takeWork() int {
	if ix == nil {
		return 0
	}
	w := ix.work
	ix.work = 0
	return w
}

// localWrites are the local slices op x writes on its own rank.
func localWrites(x *ir.Op) []ir.Slice {
	switch x.Kind {
	case ir.OpRecv, ir.OpRead:
		return x.DstSegs()
	case ir.OpReduce, ir.OpCopy:
		return []ir.Slice{x.Dst}
	case ir.OpAtomicAdd, ir.OpAtomicCAS:
		return []ir.Slice{x.Fetch()}
	}
	return nil
}

// maxWordBuffer bounds the buffer of a waited word, whose init is evaluated to know where the
// word starts.
const maxWordBuffer = 1 << 20

// wordStart is the value the word s starts with on rank r, from its buffer's init (its 8 bytes,
// which ir.WordString reads as its type says); or why it cannot be known.
func wordStart(g *ir.Graph, r int, s ir.Slice) (uint64, string) {
	b := &g.Buffers[s.Buf]
	switch {
	case b.Extern:
		return 0, fmt.Sprintf("in extern buffer %s, whose start value the caller sets: keep the word in a buffer of coredag's own", b.Name)
	case b.Bytes() > maxWordBuffer:
		return 0, fmt.Sprintf("in buffer %s of %d bytes: keep the word in a buffer of at most %d bytes, whose init is evaluated to know where it starts", b.Name, b.Bytes(), maxWordBuffer)
	case b.Init == nil:
		return 0, ""
	}
	mem := make([]byte, b.Bytes())
	if err := b.Init(r, mem); err != nil {
		return 0, fmt.Sprintf("whose init fails on rank %d: %v", r, err)
	}
	return binary.LittleEndian.Uint64(mem[s.Off*8:]), ""
}

// bigSum is the sum of ws in decimal, which may not fit in 64 bits.
func bigSum(ws []uint64) string {
	var sum, x big.Int
	for _, v := range ws {
		sum.Add(&sum, x.SetUint64(v))
	}
	return sum.String()
}

// waitAdj is the happens-before graph of the events with the orders found so far, for the
// searches of resolveWaits.
type waitAdj struct {
	start, succ  []int32
	after, later reached // the sets of the two searches resolveWaits keeps at once
	stack        []int32
}

// reached is a set of events that a search of waitAdj reached, with the list of them, so that
// the next search clears only those: a search from a wait often reaches few events, and clearing
// every event for each wait took time in the number of waits times the number of ops.
type reached struct {
	seen []bool
	list []int32
}

func newWaitAdj(g *ir.Graph, lands []ir.Edge) *waitAdj {
	n := 3 * len(g.Ops)
	a := &waitAdj{start: make([]int32, n+1), after: reached{seen: make([]bool, n)}, later: reached{seen: make([]bool, n)}}
	each := func(add func(x, y event)) {
		hbEdges(g, true, ir.OrderNone, add)
		for _, e := range lands {
			add(landOf(e.From), endOf(e.To))
		}
	}
	each(func(x, _ event) { a.start[x+1]++ })
	for i := range n {
		a.start[i+1] += a.start[i]
	}
	a.succ = make([]int32, a.start[n])
	fill := slices.Clone(a.start[:n])
	each(func(x, y event) {
		a.succ[fill[x]] = int32(y)
		fill[x]++
	})
	return a
}

// from fills r with the events reachable from e (e excluded unless on a cycle), in place of
// those of its last search, and returns its set.
func (a *waitAdj) from(e event, r *reached) []bool {
	seen := r.seen
	for _, v := range r.list {
		seen[v] = false
	}
	r.list = r.list[:0]
	a.stack = append(a.stack[:0], a.succ[a.start[e]:a.start[e+1]]...)
	for len(a.stack) > 0 {
		v := a.stack[len(a.stack)-1]
		a.stack = a.stack[:len(a.stack)-1]
		if seen[v] {
			continue
		}
		seen[v] = true
		r.list = append(r.list, v)
		a.stack = append(a.stack, a.succ[a.start[v]:a.start[v+1]]...)
	}
	return seen
}
