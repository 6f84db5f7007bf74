package replay

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// necessity is the graph of orderings that hold in every execution of the plan: node 2k is the
// start of entry k, 2k+1 its completion.
type necessity struct {
	base  [][]int // base[r][q]: id of the first entry of rank r's queue q
	ents  []entry
	preds [][]int32

	// precedes' search state, reused across calls: seen[v] == mark when v was visited.
	seen  []uint32
	mark  uint32
	stack []int32
}

func (n *necessity) id(e entry) int       { return n.base[e.r][e.q] + e.i }
func (n *necessity) start(e entry) int32  { return int32(2 * n.id(e)) }
func (n *necessity) finish(e entry) int32 { return int32(2*n.id(e) + 1) }
func (n *necessity) add(from, to int32)   { n.preds[to] = append(n.preds[to], from) }

// build collects the necessary orderings of rank `only`'s chains or, for only < 0, of every
// rank's with the orderings between a message and its receive; problems that make an entry
// impossible to run are reported.
func (c *checker) build(only int) *necessity {
	p := c.p
	n := &necessity{base: make([][]int, len(p.Ranks))}
	ranks := []int{only}
	if only < 0 {
		ranks = make([]int, len(p.Ranks))
		for r := range ranks {
			ranks[r] = r
		}
	}
	for _, r := range ranks {
		n.base[r] = make([]int, len(p.Ranks[r].Queues))
		for q := range p.Ranks[r].Queues {
			n.base[r][q] = len(n.ents)
			for i := range p.Ranks[r].Queues[q].Chain {
				n.ents = append(n.ents, entry{r, q, i})
			}
		}
	}
	n.preds = make([][]int32, 2*len(n.ents))
	generic := p.Target.Style == ir.StyleNone
	for _, r := range ranks {
		rp := &p.Ranks[r]
		// ENABLEs by target queue, in the order of their placing queue.
		enables := map[int][]entry{}
		for q := range rp.Queues {
			for i := range rp.Queues[q].Chain {
				e := &rp.Queues[q].Chain[i]
				if e.Opcode == ir.OpcSendEnable || e.Opcode == ir.OpcRecvEnable {
					if e.Queue < 0 || int(e.Queue) >= len(rp.Queues) {
						c.errorf(c.opOf(e).Pos, "%s enables a queue that does not exist", c.name(entry{r, q, i}))
						continue
					}
					enables[int(e.Queue)] = append(enables[int(e.Queue)], entry{r, q, i})
				}
			}
		}
		for q := range rp.Queues {
			wq := &rp.Queues[q]
			host := wq.Kind == ir.HostSignalQueue
			lastHost, prevPosted := -1, -1
			lastRead := -1 // the last READ or atomic before entry i
			for i := range wq.Chain {
				me := entry{r, q, i}
				e := &wq.Chain[i]
				n.add(n.start(me), n.finish(me))
				switch {
				case e.Opcode == ir.OpcHost:
					if !generic && lastHost >= 0 {
						n.add(n.finish(entry{r, q, lastHost}), n.start(me))
					}
					lastHost = i
				case host && e.Opcode == ir.OpcNop:
					if lastHost >= 0 {
						n.add(n.finish(entry{r, q, lastHost}), n.start(me))
					}
				}
				if e.Opcode != ir.OpcHost {
					if prevPosted >= 0 {
						n.add(n.start(entry{r, q, prevPosted}), n.start(me))
						n.add(n.finish(entry{r, q, prevPosted}), n.finish(me))
					}
					prevPosted = i
				}
				if e.Opcode == ir.OpcWait {
					c.waitEdge(n, r, e.Wait, me)
				}
				if e.Opcode == ir.OpcHost {
					for _, cond := range e.Waits {
						c.waitEdge(n, r, cond, me)
					}
				}
				if e.Flags&ir.Fence != 0 && lastRead >= 0 {
					// the earlier ones complete before it (in-order completions)
					n.add(n.finish(entry{r, q, lastRead}), n.start(me))
				}
				if readLike(e.Opcode) {
					lastRead = i
				}
				if generic && (isData(e.Opcode) || e.Opcode == ir.OpcHost) {
					for _, a := range c.g.Preds(e.Op) {
						obs := c.observer(ir.OpID(a))
						if obs.i < 0 {
							c.errorf(c.opOf(e).Pos, "%s waits for %s, whose completion no signalled WQE ever reports", c.name(me), c.g.Ops[a].Name)
							continue
						}
						n.add(n.finish(obs), n.start(me))
					}
				}
			}
		}
		// A managed entry starts after the ENABLE that lets it run. ENABLEs of one queue placed
		// on several queues (a management chain spread over pieces) are taken in the order of
		// their placing queues once the orderings so far (queue order, WAITs, and the ENABLEs
		// of queues already proven) prove that order.
		before := map[[2]int]bool{} // queueBefore's answers for this rank
		for q := range rp.Queues {
			wq := &rp.Queues[q]
			if !wq.Managed {
				continue
			}
			placers := enables[q]
			ordered := true
			for k := 1; k < len(placers); k++ {
				if a, b := placers[k-1], placers[k]; a.q != b.q && !n.queueBefore(c, a, b, before) && !n.precedes(c, a, b) {
					c.errorf(c.opOf(c.at(b)).Pos, "rank %d %s is enabled from both %s and %s, and nothing orders %s before %s; the checker cannot order them",
						r, wq.Name, rp.Queues[a.q].Name, rp.Queues[b.q].Name, c.name(a), c.name(b))
					ordered = false
					break
				}
			}
			if !ordered {
				continue
			}
			enabler := 0 // placers[enabler] is the first ENABLE whose UpTo passes the entries so far
			for i := range wq.Chain {
				e := &wq.Chain[i]
				if e.Opcode == ir.OpcHost {
					continue
				}
				// The first ENABLE (in placing order) past idx: idx grows along the chain, so
				// the first past it never moves back.
				me := entry{r, q, i}
				idx := uint32(c.posted[r][q][i])
				for enabler < len(placers) && c.at(placers[enabler]).UpTo <= idx {
					enabler++
				}
				if enabler == len(placers) {
					c.errorf(c.opOf(e).Pos, "%s is on managed queue %s but no ENABLE ever lets it run", c.name(me), wq.Name)
					continue
				}
				n.add(n.start(placers[enabler]), n.start(me))
			}
		}
	}
	if only >= 0 {
		return n
	}
	for _, m := range c.messages() {
		// A message starts only once the peer's receive is posted (RC retries it at the head
		// of its queue until then: receiver not ready), and the receive completes only once
		// the message was sent.
		s, r := m[0], m[1]
		n.add(n.start(r), n.start(s))
		n.add(n.start(s), n.finish(r))
	}
	return n
}

// precedes reports whether the start of entry a, of the same rank as b, precedes the start of b
// in every execution, through the orderings n holds: backwards from b's start, it looks for an
// event of a's queue at or past a (its start or completion, both after a's start in queue order;
// a is on a queue of posted entries, which start in order). Every ordering n holds is necessary:
// those of queue order and WAITs by themselves, and those of ENABLEs only once the order of
// their placers was proven this way, with the orderings before them.
func (n *necessity) precedes(c *checker, a, b entry) bool {
	base := n.base[a.r][a.q]
	end := base + len(c.p.Ranks[a.r].Queues[a.q].Chain)
	if len(n.seen) < len(n.preds) {
		n.seen = make([]uint32, len(n.preds))
		n.mark = 0
	}
	n.mark++
	if n.mark == 0 { // wrapped: clear the old marks
		clear(n.seen)
		n.mark = 1
	}
	n.seen[n.start(b)] = n.mark
	stack := append(n.stack[:0], n.start(b))
	defer func() { n.stack = stack[:0] }()
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id := int(v / 2); id >= base+a.i && id < end {
			return true
		}
		for _, u := range n.preds[v] {
			if n.seen[u] != n.mark {
				n.seen[u] = n.mark
				stack = append(stack, u)
			}
		}
	}
	return false
}

// queueBefore reports whether every entry of a's queue starts before b, shown once per pair of
// queues: the last entry of a's queue precedes the first of b's, and both queues, posted and
// without host steps, start their entries in order. This is how the compiler chains management
// pieces (each opens with a WAIT for the end of the one before), and it spares a search per
// pair of placers.
func (n *necessity) queueBefore(c *checker, a, b entry, cache map[[2]int]bool) bool {
	key := [2]int{a.q, b.q}
	ok, known := cache[key]
	if !known {
		qs := c.p.Ranks[a.r].Queues
		ok = postedInOrder(&qs[a.q]) && postedInOrder(&qs[b.q]) &&
			n.precedes(c, entry{a.r, a.q, len(qs[a.q].Chain) - 1}, entry{b.r, b.q, 0})
		cache[key] = ok
	}
	return ok
}

// postedInOrder reports whether a queue's entries all start in chain order: it is not empty,
// not managed, and has no host steps.
func postedInOrder(q *ir.WorkQueue) bool {
	if q.Managed || len(q.Chain) == 0 {
		return false
	}
	for i := range q.Chain {
		if q.Chain[i].Opcode == ir.OpcHost {
			return false
		}
	}
	return true
}

// waitEdge adds the ordering a completion condition implies: the cond.Count-th completion of the
// CQ's queue precedes the waiter.
func (c *checker) waitEdge(n *necessity, r int, cond ir.Cond, waiter entry) {
	rp := &c.p.Ranks[r]
	if cond.CQ < 0 || int(cond.CQ) >= len(rp.CQs) {
		c.errorf(c.opOf(c.at(waiter)).Pos, "%s waits on CQ %d, which does not exist", c.name(waiter), cond.CQ)
		return
	}
	if cond.Count == 0 {
		return
	}
	q := rp.CQs[cond.CQ].Queue
	i := c.signalledNth(r, q, cond.Count)
	if i < 0 {
		c.errorf(c.opOf(c.at(waiter)).Pos, "%s waits for %s >= %d, but one iteration produces only %d completions there: it blocks forever",
			c.name(waiter), rp.CQs[cond.CQ].Name, cond.Count, rp.CQs[cond.CQ].PerIteration)
		return
	}
	n.add(n.finish(entry{r, q, i}), n.start(waiter))
}

// observer is the entry whose completion tells a polling engine that op a completed: a's own
// entry if signalled (or a HOST step), else the next signalled entry of its queue. i < 0: none.
func (c *checker) observer(a ir.OpID) entry {
	e := c.of[a]
	if c.at(e).Opcode == ir.OpcHost {
		return e
	}
	sig := c.signalled[e.r][e.q]
	if k, _ := slices.BinarySearch(sig, int32(e.i)); k < len(sig) {
		return entry{e.r, e.q, int(sig[k])}
	}
	return entry{e.r, e.q, -1}
}

// checkEnforced proves every `after` edge holds in every execution, a rank at a time: an edge
// joins ops of one rank, and what is guaranteed complete before an event is what the rank's own
// orderings guarantee (a conservative view), so one rank's necessity graph is all it takes, and
// memory holds one rank's per core. A cycle through the orderings of one rank is reported here;
// one through messages between ranks stops the progress check, which then looks for it
// (deadlockCycle). Once ctx is cancelled, the ranks left are not proven.
func (c *checker) checkEnforced(ctx context.Context) {
	edges := make([][]int32, len(c.p.Ranks)) // by rank: the indices in g.Edges of its edges
	for k, edge := range c.g.Edges {
		r := c.of[edge.To].r
		edges[r] = append(edges[r], int32(k))
	}
	// Ranks are proven on every core, each with its own diagnostics, joined in rank order so
	// that the result does not depend on the number of workers.
	found := make([]diag.List, len(c.p.Ranks))
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range max(1, min(runtime.GOMAXPROCS(0), len(c.p.Ranks))) {
		wg.Go(func() {
			for r := int(next.Add(1) - 1); r < len(c.p.Ranks); r = int(next.Add(1) - 1) {
				if stop.Cause(ctx) != nil {
					return
				}
				rc := *c // shares the read-only index; the diagnostics are the rank's
				rc.errs = nil
				rc.enforcedRank(ctx, r, edges[r])
				found[r] = rc.errs
			}
		})
	}
	wg.Wait()
	for _, l := range found {
		for _, d := range l {
			if len(c.errs) < maxErrors {
				c.errs = append(c.errs, d)
			}
		}
	}
}

// order is a topological order of n's events; ok is false when they form a cycle, and indeg
// then marks (> 0) the events no order reaches.
func (n *necessity) order() (order []int32, indeg []int32, ok bool) {
	total := len(n.preds)
	succ := make([][]int32, total)
	indeg = make([]int32, total)
	for v, ps := range n.preds {
		indeg[v] = int32(len(ps))
		for _, u := range ps {
			succ[u] = append(succ[u], int32(v))
		}
	}
	order = make([]int32, 0, total)
	for v := range indeg {
		if indeg[v] == 0 {
			order = append(order, int32(v))
		}
	}
	for k := 0; k < len(order); k++ {
		for _, w := range succ[order[k]] {
			indeg[w]--
			if indeg[w] == 0 {
				order = append(order, w)
			}
		}
	}
	return order, indeg, len(order) == total
}

// enforcedRank proves rank r's edges (edges: their indices in g.Edges), unless ctx is cancelled
// first.
func (c *checker) enforcedRank(ctx context.Context, r int, edges []int32) {
	before := len(c.errs)
	n := c.build(r)
	if len(c.errs) > before {
		return
	}
	order, indeg, ok := n.order()
	if !ok {
		c.errorf(c.g.Ops[0].Pos, "the chains deadlock: their orderings form a cycle: %s", n.cycle(c, indeg))
		return
	}
	if c.p.Target.Style == ir.StyleNone {
		return // the polling engine enforces edges by construction; build checked it can observe them
	}
	// guaranteed[v][q]: entries [0, value) of queue q of the rank surely completed before v.
	queues := len(c.p.Ranks[r].Queues)
	vec := make([]int32, len(n.preds)*queues)
	poll := stop.Every(ctx, pollSteps)
	for _, v := range order {
		if poll.Step() != nil {
			return
		}
		g := vec[int(v)*queues : int(v+1)*queues]
		for _, u := range n.preds[v] {
			ue := n.ents[u/2]
			for j, x := range vec[int(u)*queues : int(u+1)*queues] {
				g[j] = max(g[j], x)
			}
			if u%2 == 1 {
				g[ue.q] = max(g[ue.q], int32(ue.i+1))
			}
		}
	}
	for _, k := range edges {
		edge := &c.g.Edges[k]
		a, b := c.of[edge.From], c.of[edge.To]
		if a.r == b.r && a.q == b.q && a.i < b.i && (!readLike(c.at(a).Opcode) || c.at(b).Flags&ir.Fence != 0) {
			continue // RC: queue order gives the same effect
		}
		if a.r == b.r && vec[int(n.start(b))*queues+a.q] > int32(a.i) {
			continue
		}
		c.errorf(edge.Pos, "edge %s -> %s is not enforced: %s can start before %s completes (%s, %s)",
			c.g.OpString(edge.From), c.g.Ops[edge.To].Name, c.g.Ops[edge.To].Name, c.g.Ops[edge.From].Name, c.name(b), c.name(a))
	}
}

// deadlockCycle names a cycle of the necessary orderings of every rank's chains, messages
// between ranks included ("" if there is none): what keeps a stuck plan from progressing.
func (c *checker) deadlockCycle() string {
	n := c.build(-1)
	if _, indeg, ok := n.order(); !ok {
		return n.cycle(c, indeg)
	}
	return ""
}

// cycle names one cycle of the necessity graph among the events Kahn's algorithm could not order
// (indeg > 0), each entry once, in the order the events must happen, e.g. a RECV_EN, the RECV it
// posts, the peer's SEND that needs it, and the WAIT and RECV_EN queued behind that SEND.
func (n *necessity) cycle(c *checker, indeg []int32) string {
	v := -1
	for u := range indeg {
		if indeg[u] > 0 {
			v = u
			break
		}
	}
	// Every unordered event has an unordered predecessor: walk backwards until an event repeats.
	seen := map[int]int{}
	var path []int
	for {
		if at, ok := seen[v]; ok {
			path = path[at:]
			break
		}
		seen[v] = len(path)
		path = append(path, v)
		next := -1
		for _, u := range n.preds[v] {
			if indeg[u] > 0 {
				next = int(u)
				break
			}
		}
		if next < 0 {
			return "(none found)"
		}
		v = next
	}
	var names []string
	last := -1
	for k := len(path) - 1; k >= 0; k-- { // forwards in time
		if id := path[k] / 2; id != last {
			names = append(names, c.name(n.ents[id]))
			last = id
		}
	}
	if len(names) > 12 {
		names = append(names[:12], fmt.Sprintf("... (%d more)", len(names)-12))
	}
	return strings.Join(names, " -> ")
}
