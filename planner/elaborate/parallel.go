package elaborate

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate/internal/arena"
)

// The ranks past the first are elaborated in parallel. Each rank evaluates the SPMD text on its
// own, so contiguous shards of ranks are elaborated at once, each into its window of the Graph's
// ops, queues and edges (sized from rank 0, as the sequential run sizes them), and then joined in
// rank order. A shard numbers its ops and queues from where its windows start; the numbers are
// shifted to the Graph's once the shards before it are known, if those were not as large as rank
// 0 (ranks alike, as SPMD ranks mostly are, are numbered right away). The Graph is the
// sequential one.
//
// Diagnostics are another matter: which mistake comes first, and where the op, iteration and
// step limits are passed, depend on every rank before. So the shards only elaborate ranks
// without mistakes: the first diagnostic in any shard, or a limit passed by all of them
// together, stops them all, and the ranks past the first are elaborated again one after the
// other, which reports as the sequential run does. The limits still hold before memory is spent: a shard
// takes ops from the op limit, a chunk at a time, before it makes them. Plans with a mistake
// thus pay for their ranks twice, at most; plans without one are elaborated once.

// parallelOps is the least number of ops (rank 0's times the ranks) that makes the ranks past
// the first elaborate in parallel; smaller plans are done before shards would start.
const parallelOps = 1 << 13

// parallelOps is the package's parallelOps, or what Options set (tests).
func (el *elaborator) parallelOps() int {
	if el.opt.parallelSet {
		return el.opt.parallelOps
	}
	return parallelOps
}

// workers is the number of goroutines that elaborate ranks at once (Options.Workers).
func (el *elaborator) workers() int {
	if el.opt.Workers > 0 {
		return el.opt.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// opChunk is how many ops a shard takes from the op limit at a time.
const opChunk = 1 << 12

// pool is what the shards of one elaboration share.
type pool struct {
	g      *ir.Graph    // the Graph whose windows the shards fill
	ops    atomic.Int64 // ops taken from the op limit: rank 0's, then the shards' (opRoom)
	iters  atomic.Int64 // loop iterations, added rank by rank
	steps  atomic.Int64 // evaluation steps (steps.go), added rank by rank
	failed atomic.Bool  // a shard met a diagnostic or a limit: the ranks are done sequentially

	// The memory budget's bytes (0: none) and what of it the shards hold besides their ops:
	// the queues and edges of the windows, reserved for ranks as large as rank 0, and what they
	// hold past them (shardRoom). Past the budget the shards stop, and the ranks done one after
	// the other meet its refusal where they pass it.
	mem      int64
	reserved int64
	held     atomic.Int64
}

// fits reports whether ops ops fit in the memory budget beside what the shards hold.
func (p *pool) fits(ops int64) bool {
	return p.mem <= 0 || budget.Add(p.reserved, p.held.Load(), budget.Mul(ops, BytesPerOp)) <= p.mem
}

// shard is a run of ranks, first .. end-1, and what their elaboration made.
type shard struct {
	first, end int
	room       int // the ops its ranks would have if they were as large as rank 0
	taken      int // ops taken from pool.ops
	queueRoom  int // the queues its window holds (shardRoom)
	// its ops, queues and edges, in windows of the Graph's arrays (arena.Part)
	ops      arena.Part[ir.Op]
	queues   arena.Part[ir.Queue]
	edges    arena.Part[ir.Edge]
	peerRefs []queueRef
}

// parallel elaborates ranks 1 .. Ranks-1 in shards, once rank 0 is done, when the plan is large
// enough. It reports whether it did; if not, nothing of the Graph changed since rank 0. Either
// way, it first prefaults the room that run made in Ops for them, all of it: a prefault beside
// the shards, window by window ahead of them, was outrun by the collection that scans Ops
// (started by its allocation), which costs more than it saves (prefault).
func (el *elaborator) parallel() bool {
	g := el.g
	n := el.workers()
	ops0, queues0, edges0 := len(g.Ops), len(g.Queues), len(g.Edges)
	arena.Prefault(g.Ops[ops0:cap(g.Ops)], touchOp)
	if n < 2 || g.Ranks < 3 || ops0 == 0 || ops0*g.Ranks < el.parallelOps() || ops0*g.Ranks > el.maxOps || !el.clean() {
		return false
	}
	// Windows for ranks as large as rank 0 (Ops was sized so by run), if their ops, queues and
	// edges fit in the budget together (held); if not, the ranks are elaborated one after the
	// other, their arrays growing as they go, each growth checked (room).
	p := &pool{g: g}
	maxOps := el.maxOps
	if b := el.opt.Budget.Bytes; b > 0 {
		h := el.held()
		h[heldOps] = holding{int64(ops0 * g.Ranks), BytesPerOp}
		h[heldQueues] = rides(holding{int64(queues0 * g.Ranks), BytesPerQueue})
		h[heldEdges] = larger(h[heldEdges], holding{int64(edges0 * g.Ranks), int64(unsafe.Sizeof(ir.Edge{}))})
		if h.total() > b {
			return false
		}
		p.mem, p.reserved = b, h.total()-h[heldOps].bytes()
		maxOps = min(maxOps, int((b-p.reserved)/BytesPerOp))
	}
	g.Queues = arena.GrowTo(g.Queues, queues0*g.Ranks)
	g.Edges = arena.GrowTo(g.Edges, edges0*g.Ranks)
	p.ops.Store(int64(ops0))
	p.iters.Store(el.iters)
	p.steps.Store(el.work.steps())
	k := min(4*n, g.Ranks-1) // a few per worker: a busy core slows one shard, not half the ranks
	shards := make([]*shard, k)
	for i := range shards {
		first, end := 1+(g.Ranks-1)*i/k, 1+(g.Ranks-1)*(i+1)/k
		shards[i] = &shard{first: first, end: end, room: ops0 * (end - first)}
		shards[i].ops.At, shards[i].queues.At, shards[i].edges.At = ops0*first, queues0*first, edges0*first
	}
	var wg sync.WaitGroup
	var next atomic.Int64 // the next shard to elaborate
	for range min(n, k) {
		w := el.worker(p)
		w.maxOps = maxOps // what the budget leaves for ops beside the windows
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(k) && !p.failed.Load(); i = next.Add(1) - 1 {
				w.elaborateShard(shards[i], ops0, queues0, edges0)
			}
		})
	}
	wg.Wait()
	if p.failed.Load() { // back to rank 0
		clear(g.Ops[ops0:cap(g.Ops)])
		clear(g.Queues[queues0:cap(g.Queues)])
		clear(g.Edges[edges0:cap(g.Edges)])
		clear(g.Rank[1:])
		return false
	}
	el.work.grant(p.steps.Load()) // el's count is that of all ranks
	g.Ops = arena.Join(g.Ops, k, func(i int) *arena.Part[ir.Op] { return &shards[i].ops })
	g.Queues = arena.Join(g.Queues, k, func(i int) *arena.Part[ir.Queue] { return &shards[i].queues })
	g.Edges = arena.Join(g.Edges, k, func(i int) *arena.Part[ir.Edge] { return &shards[i].edges })
	for _, sh := range shards {
		el.peerRefs = append(el.peerRefs, sh.peerRefs...)
		wg.Go(func() { sh.shift(g) })
	}
	wg.Wait()
	return true
}

// worker returns an elaborator for shards of el's ranks: it shares with el only what it reads,
// and keeps its scratch (names, references) from one shard to the next.
func (el *elaborator) worker(p *pool) *elaborator {
	w := *el
	w.pool = p
	w.diag = [numPhases]diags{}
	w.broken.ops, w.broken.queues = brokenNames{}, brokenNames{}
	w.opIdx, w.queueIdx, w.opNames = map[string]ir.OpID{}, map[string]ir.QueueID{}, nil
	w.pending, w.opQueue, w.peerRefs, w.cur = nil, nil, nil, nil
	w.splits, w.splitOf = nil, nil
	w.names, w.mem = newNameTables(el.file), el.mem.forWorker()
	w.memo = el.memo.forWorker() // the results are shared, the scratch is not
	w.work, w.loops, w.ranksDone = el.work.forWorker(), nil, 0
	return &w
}

// elaborateShard elaborates the ranks of sh into windows of the Graph's slices from where ranks
// as large as rank 0 would put them, until one of them, or of another shard, fails.
func (el *elaborator) elaborateShard(sh *shard, ops0, queues0, edges0 int) {
	g := *el.pool.g
	g.Ops = arena.Window(g.Ops, sh.ops.At, ops0*sh.end)
	g.Queues = arena.Window(g.Queues, sh.queues.At, queues0*sh.end)
	g.Edges = arena.Window(g.Edges, sh.edges.At, edges0*sh.end)
	sh.queueRoom = cap(g.Queues)
	el.g, el.shard, el.first, el.end, el.peerRefs = &g, sh, sh.first, sh.end, nil
	el.opBase, el.queueBase = ir.OpID(sh.ops.At), ir.QueueID(sh.queues.At)
	defer func() { sh.ops.S, sh.queues.S, sh.edges.S, sh.peerRefs = g.Ops, g.Queues, g.Edges, el.peerRefs }()
	for r := sh.first; r < sh.end; r++ {
		if el.pool.failed.Load() || el.stopCancelled() {
			el.pool.failed.Store(true)
			return
		}
		iters, steps := el.iters, el.work.steps()
		el.elaborateRank(r)
		if !el.clean() || el.pool.iters.Add(el.iters-iters) > MaxIterations || el.pool.steps.Add(el.work.steps()-steps) > el.work.limit {
			el.pool.failed.Store(true)
			return
		}
	}
}

// shift renumbers the shard's ops and queues, numbered from where its windows started and now
// at ops.To and queues.To in g, from there: when its ranks and those before were as large as rank
// 0, they are where they were numbered, and nothing changes.
func (sh *shard) shift(g *ir.Graph) {
	dop, dq := ir.OpID(sh.ops.To-sh.ops.At), ir.QueueID(sh.queues.To-sh.queues.At)
	if dop == 0 && dq == 0 {
		return
	}
	for r := sh.first; r < sh.end; r++ {
		s := &g.Rank[r]
		s.FirstOp, s.EndOp, s.FirstQueue, s.EndQueue = s.FirstOp+dop, s.EndOp+dop, s.FirstQueue+dq, s.EndQueue+dq
	}
	for i := range sh.ops.S {
		if op := &g.Ops[sh.ops.To+i]; op.Queue != ir.None {
			op.Queue += dq
		}
	}
	for i := range sh.queues.S {
		q := &g.Queues[sh.queues.To+i]
		for j := range q.SendOps {
			q.SendOps[j] += dop
		}
		for j := range q.RecvOps {
			q.RecvOps[j] += dop
		}
	}
	for i := range sh.edges.S {
		e := &g.Edges[sh.edges.To+i]
		e.From, e.To = e.From+dop, e.To+dop
	}
}

// clean reports that nothing went wrong so far: no diagnostic, no limit passed.
func (el *elaborator) clean() bool {
	for ph := range el.diag {
		if el.diag[ph].Len() > 0 {
			return false
		}
	}
	return !el.truncated
}

// opRoom reports whether the plan may have one more op: in a shard, whether it could take it
// from the op limit shared by all of them. A shard takes no more than its room until it is full
// (ranks as large as rank 0 then fit whenever the plan does), and then opChunk at a time.
func (el *elaborator) opRoom() bool {
	sh := el.shard
	if sh == nil {
		return len(el.g.Ops) < el.maxOps
	}
	if len(el.g.Ops) < sh.taken {
		return true
	}
	take := opChunk
	if left := sh.room - sh.taken; left > 0 {
		take = min(take, left)
	}
	if ops := el.pool.ops.Add(int64(take)); el.pool.failed.Load() || ops > int64(el.maxOps) || !el.pool.fits(ops) {
		return false
	}
	sh.taken += take
	return true
}

// shardRoom is room in a shard: what the windows hold was reserved by parallel; past them, an
// array of n elements of size bytes each (the kind's, held) is held whole, and a queue
// BytesPerQueue. When the budget does not hold it beside the rest, the shards stop.
func (el *elaborator) shardRoom(kind int, n int, size uintptr) bool {
	more := budget.Mul(int64(n), int64(size))
	if kind == heldQueues {
		more = 0
		if n > el.shard.queueRoom {
			more = BytesPerQueue
		}
	}
	el.pool.held.Add(more)
	if el.pool.fits(el.pool.ops.Load()) {
		return true
	}
	el.pool.failed.Store(true)
	el.truncated = true
	return false
}

// opsLeft is how many more ops the plan may have; in a shard, at most that (what the other
// shards will take is not known yet).
func (el *elaborator) opsLeft() int {
	if sh := el.shard; sh != nil {
		return el.maxOps - int(el.pool.ops.Load()) + sh.taken - len(el.g.Ops)
	}
	return el.maxOps - len(el.g.Ops)
}
