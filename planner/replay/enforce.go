package replay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/coredag/coredag/ir"
)

// necessity is the graph of orderings that hold in every execution of the plan: node 2k is the
// start of entry k, 2k+1 its completion.
type necessity struct {
	base  [][]int // base[r][q]: id of the first entry of rank r's queue q
	ents  []entry
	preds [][]int32
}

func (n *necessity) id(e entry) int       { return n.base[e.r][e.q] + e.i }
func (n *necessity) start(e entry) int32  { return int32(2 * n.id(e)) }
func (n *necessity) finish(e entry) int32 { return int32(2*n.id(e) + 1) }
func (n *necessity) add(from, to int32)   { n.preds[to] = append(n.preds[to], from) }

// build collects the necessary orderings; problems that make an entry impossible to run are
// reported.
func (c *checker) build() *necessity {
	p := c.p
	n := &necessity{base: make([][]int, len(p.Ranks))}
	for r := range p.Ranks {
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
	for r := range p.Ranks {
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
			if placers := enables[q]; len(placers) > 0 {
				for _, pe := range placers[1:] {
					if pe.q != placers[0].q {
						c.errorf(c.opOf(c.at(pe)).Pos, "rank %d %s is enabled from both %s and %s; the checker cannot order them", r, wq.Name, rp.Queues[placers[0].q].Name, rp.Queues[pe.q].Name)
					}
				}
			}
			enabler := 0   // enables[q][enabler] is the first ENABLE whose UpTo passes the entries so far
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
				if wq.Managed && e.Opcode != ir.OpcHost {
					// The first ENABLE (in placing order) past idx: idx grows along the chain, so
					// the first past it never moves back.
					idx := uint32(c.posted[r][q][i])
					for enabler < len(enables[q]) && c.at(enables[q][enabler]).UpTo <= idx {
						enabler++
					}
					var en *entry
					if enabler < len(enables[q]) {
						en = &enables[q][enabler]
					}
					if en == nil {
						c.errorf(c.opOf(e).Pos, "%s is on managed queue %s but no ENABLE ever lets it run", c.name(me), wq.Name)
					} else {
						n.add(n.start(*en), n.start(me))
					}
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

// checkEnforced proves every `after` edge holds in every execution.
func (c *checker) checkEnforced() {
	n := c.build()
	if len(c.errs) > 0 {
		return
	}
	// Topological order of the necessity graph.
	total := len(n.preds)
	succ := make([][]int32, total)
	indeg := make([]int, total)
	for v, ps := range n.preds {
		indeg[v] = len(ps)
		for _, u := range ps {
			succ[u] = append(succ[u], int32(v))
		}
	}
	order := make([]int32, 0, total)
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
	if len(order) < total {
		c.errorf(c.g.Ops[0].Pos, "the chains deadlock: their orderings form a cycle: %s", n.cycle(c, indeg))
		return
	}
	if c.p.Target.Style == ir.StyleNone {
		return // the polling engine enforces edges by construction; build checked it can observe them
	}
	// guaranteed[v][q]: entries [0, value) of queue q of v's rank surely completed before v.
	dims := make([]int, len(c.p.Ranks))
	for r := range c.p.Ranks {
		dims[r] = len(c.p.Ranks[r].Queues)
	}
	vec := make([][]int32, total)
	for _, v := range order {
		e := n.ents[v/2]
		g := make([]int32, dims[e.r])
		for _, u := range n.preds[v] {
			ue := n.ents[u/2]
			if ue.r != e.r {
				continue // only local knowledge: conservative
			}
			for j, x := range vec[u] {
				g[j] = max(g[j], x)
			}
			if u%2 == 1 {
				g[ue.q] = max(g[ue.q], int32(ue.i+1))
			}
		}
		vec[v] = g
	}
	for _, edge := range c.g.Edges {
		a, b := c.of[edge.From], c.of[edge.To]
		if a.r == b.r && a.q == b.q && a.i < b.i && (!readLike(c.at(a).Opcode) || c.at(b).Flags&ir.Fence != 0) {
			continue // RC: queue order gives the same effect
		}
		if vec[n.start(b)][a.q] > int32(a.i) {
			continue
		}
		c.errorf(edge.Pos, "edge %s -> %s is not enforced: %s can start before %s completes (%s, %s)",
			c.g.OpString(edge.From), c.g.Ops[edge.To].Name, c.g.Ops[edge.To].Name, c.g.Ops[edge.From].Name, c.name(b), c.name(a))
	}
}

// cycle names one cycle of the necessity graph among the events Kahn's algorithm could not order
// (indeg > 0), each entry once, in the order the events must happen, e.g. a RECV_EN, the RECV it
// posts, the peer's SEND that needs it, and the WAIT and RECV_EN queued behind that SEND.
func (n *necessity) cycle(c *checker, indeg []int) string {
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
