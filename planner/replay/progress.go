package replay

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/wait"
)

// machine executes the chains abstractly, with the NIC's semantics: FIFO queues, WAITs on
// cumulative 24-bit CQ counts, managed queues gated by 16-bit ENABLE indices, fences, in-order
// completions, a message (SEND or RDMA_WRITE_IMM) starting only once the peer's matching RECV is
// posted (RNR retries hold it and everything behind it at the head of its send queue), and the
// CPU running HOST steps when their conditions hold.
//
// It runs to a fixpoint by rank: a rank is visited again only when something it may be waiting
// for changed (its own counts, enables and completions, or a peer's posting of the other end of a
// message), and a full pass over every rank confirms the fixpoint, so the work is in proportion
// to the chains, not to their length times the ring's.
type machine struct {
	c       *checker
	it      uint64
	head    [][]int // per rank, per queue: the next entry to start
	tail    [][]int // per rank, per queue: the next entry to complete (completions are in order)
	started [][][]bool
	done    [][][]bool
	count   [][]uint32 // per rank, per CQ
	enabled [][]uint32 // per rank, per work queue: ENABLE index reached (16-bit)
	partner [][][]mate // per rank, per queue, per entry: the other end of its message
	work    []int      // ranks to visit
	queued  []bool     // by rank: in work
	poll    stop.Poll  // counts the visits, and looks at the context every pollSteps of them
}

// checkProgress executes the chains for opt.Iterations iterations (machine), until one does not
// finish or ctx is cancelled.
func (c *checker) checkProgress(ctx context.Context) {
	p := c.p
	m := &machine{c: c, partner: make([][][]mate, len(p.Ranks)), poll: stop.Every(ctx, pollSteps)}
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		m.partner[r] = make([][]mate, len(rp.Queues))
		for q := range rp.Queues {
			m.partner[r][q] = make([]mate, len(rp.Queues[q].Chain))
			for i := range m.partner[r][q] {
				m.partner[r][q][i].r = -1
			}
		}
	}
	for _, pr := range c.messages() {
		a, b := pr[0], pr[1]
		m.partner[a.r][a.q][a.i] = mate{int32(b.r), int32(b.q), int32(b.i)}
		m.partner[b.r][b.q][b.i] = mate{int32(a.r), int32(a.q), int32(a.i)}
	}
	m.count = make([][]uint32, len(p.Ranks))
	m.enabled = make([][]uint32, len(p.Ranks))
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		m.count[r] = make([]uint32, len(rp.CQs))
		for ci := range rp.CQs {
			m.count[r][ci] = wait.CQ.At(0, rp.CQs[ci].PerIteration, c.opt.FirstIter)
		}
		m.enabled[r] = make([]uint32, len(rp.Queues))
		for q := range rp.Queues {
			m.enabled[r][q] = wait.WQ.At(0, rp.Queues[q].PerIteration, c.opt.FirstIter)
		}
	}
	for k := 0; k < c.opt.Iterations; k++ {
		m.it = c.opt.FirstIter + uint64(k)
		if !m.iterate() {
			return
		}
	}
}

func (m *machine) reset() {
	p := m.c.p
	if m.head == nil {
		m.head = make([][]int, len(p.Ranks))
		m.tail = make([][]int, len(p.Ranks))
		m.started = make([][][]bool, len(p.Ranks))
		m.done = make([][][]bool, len(p.Ranks))
		m.queued = make([]bool, len(p.Ranks))
		for r := range p.Ranks {
			rp := &p.Ranks[r]
			m.head[r] = make([]int, len(rp.Queues))
			m.tail[r] = make([]int, len(rp.Queues))
			m.started[r] = make([][]bool, len(rp.Queues))
			m.done[r] = make([][]bool, len(rp.Queues))
			for q := range rp.Queues {
				m.started[r][q] = make([]bool, len(rp.Queues[q].Chain))
				m.done[r][q] = make([]bool, len(rp.Queues[q].Chain))
			}
		}
		return
	}
	for r := range p.Ranks {
		clear(m.head[r])
		clear(m.tail[r])
		for q := range m.started[r] {
			clear(m.started[r][q])
			clear(m.done[r][q])
		}
	}
}

// cond reports whether a completion condition holds in this iteration.
func (m *machine) cond(r int, c ir.Cond) bool {
	return c.SatisfiedBy(uint64(m.count[r][c.CQ]), m.c.p.Ranks[r].CQs[c.CQ].PerIteration, m.it)
}

// observed reports whether a polling engine has seen op a complete.
func (m *machine) observed(a ir.OpID) bool {
	o := m.c.observer(a)
	return o.i >= 0 && m.done[o.r][o.q][o.i]
}

// canStart reports whether the entry at the head of a queue may start now.
func (m *machine) canStart(e entry) bool {
	c := m.c
	rp := &c.p.Ranks[e.r]
	wq := &rp.Queues[e.q]
	w := &wq.Chain[e.i]
	generic := c.p.Target.Style == ir.StyleNone
	switch w.Opcode {
	case ir.OpcWait:
		return m.cond(e.r, w.Wait)
	case ir.OpcHost:
		if generic {
			for _, a := range c.g.Preds(w.Op) {
				if !m.observed(ir.OpID(a)) {
					return false
				}
			}
			return true
		}
		for _, cd := range w.Waits {
			if !m.cond(e.r, cd) {
				return false
			}
		}
		return true
	}
	if wq.Managed {
		idx := wait.WQ.At(uint32(c.posted[e.r][e.q][e.i]), wq.PerIteration, m.it) // the WQE's producer index
		if !wait.Enabled(uint64(idx), m.enabled[e.r][e.q]) {
			return false
		}
	}
	if m.rnr(e) {
		return false
	}
	if w.Flags&ir.Fence != 0 {
		for j := m.tail[e.r][e.q]; j < e.i; j++ { // entries before the tail are done
			if readLike(wq.Chain[j].Opcode) && !m.done[e.r][e.q][j] {
				return false
			}
		}
	}
	if generic && isData(w.Opcode) {
		for _, a := range c.g.Preds(w.Op) {
			if !m.observed(ir.OpID(a)) {
				return false
			}
		}
	}
	return true
}

// iterate runs one iteration to its fixpoint and reports whether everything completed; false
// too, reporting nothing, once m's context is cancelled.
func (m *machine) iterate() bool {
	c := m.c
	p := c.p
	m.reset()
	for r := range p.Ranks {
		m.wake(r)
	}
	for {
		for len(m.work) > 0 {
			r := m.work[len(m.work)-1]
			m.work = m.work[:len(m.work)-1]
			m.queued[r] = false
			if m.poll.Step() != nil {
				return false
			}
			if m.visit(r) {
				m.wake(r)
			}
		}
		// Every change wakes the ranks it can concern; one pass over all of them confirms it.
		for r := range p.Ranks {
			if m.poll.Step() != nil {
				return false
			}
			if m.visit(r) {
				m.wake(r)
			}
		}
		if len(m.work) == 0 {
			break
		}
	}
	var stuck []string
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		for q := range rp.Queues {
			for i := range rp.Queues[q].Chain {
				if !m.done[r][q][i] {
					stuck = append(stuck, m.why(entry{r, q, i}))
					break // the first blocked entry of each queue
				}
			}
		}
	}
	if len(stuck) > 0 {
		c.stuck = true
		c.errorf(c.g.Ops[0].Pos, "iteration %d never finishes; blocked: %s", m.it, joinStrings(stuck))
		return false
	}
	return true
}

// mate is the other end of an entry's message (r < 0: none).
type mate struct{ r, q, i int32 }

// mate returns the other end of e's message, if e is a message or the receive of one.
func (m *machine) mate(e entry) (entry, bool) {
	o := m.partner[e.r][e.q][e.i]
	return entry{int(o.r), int(o.q), int(o.i)}, o.r >= 0
}

// wake queues rank r for a visit.
func (m *machine) wake(r int) {
	if !m.queued[r] {
		m.queued[r] = true
		m.work = append(m.work, r)
	}
}

// visit starts and completes on rank r's queues what can start and complete now, waking the
// ranks of messages it posts, and reports whether anything changed.
func (m *machine) visit(r int) bool {
	c := m.c
	rp := &c.p.Ranks[r]
	generic := c.p.Target.Style == ir.StyleNone
	progress := false
	for q := range rp.Queues {
		wq := &rp.Queues[q]
		if generic && wq.Kind == ir.HostSignalQueue {
			// the polling engine runs host ops as they become ready, in any order
			for i := m.tail[r][q]; i < len(wq.Chain); i++ {
				e := entry{r, q, i}
				if !m.started[r][q][i] && m.canStart(e) {
					m.started[r][q][i], m.done[r][q][i] = true, true
					progress = true
				}
			}
			for m.tail[r][q] < len(wq.Chain) && m.done[r][q][m.tail[r][q]] {
				m.tail[r][q]++
			}
			continue
		}
		for m.head[r][q] < len(wq.Chain) {
			e := entry{r, q, m.head[r][q]}
			if !m.canStart(e) {
				break
			}
			w := &wq.Chain[e.i]
			m.started[r][q][e.i] = true
			m.head[r][q]++
			progress = true
			if o, ok := m.mate(e); ok && o.r != r {
				m.wake(o.r) // its other end may start (RNR) or complete now
			}
			// WAIT and ENABLE entries complete through the in-order loop below (a signalled
			// one produces a CQE like any other); the CPU finishes a HOST step as it starts it.
			switch w.Opcode {
			case ir.OpcHost:
				m.done[r][q][e.i] = true
			case ir.OpcSendEnable, ir.OpcRecvEnable:
				t := w.Queue
				m.enabled[r][t] = wait.Raise(m.enabled[r][t], w.Enable.At(rp.Queues[t].PerIteration, m.it))
			}
		}
		// completions, in queue order
		for i := m.tail[r][q]; i < len(wq.Chain); i++ {
			if !m.done[r][q][i] {
				if !m.started[r][q][i] || !m.completable(entry{r, q, i}) {
					break
				}
				m.done[r][q][i] = true
				progress = true
				if wq.Chain[i].Flags&ir.Signalled != 0 && wq.Chain[i].Opcode != ir.OpcHost {
					m.count[r][wq.CQ] = wait.CQ.Add(m.count[r][wq.CQ], 1)
				}
			}
			m.tail[r][q] = i + 1
		}
	}
	return progress
}

// rnr reports whether e is a message (SEND or RDMA_WRITE_IMM) whose matching RECV at the peer is
// not posted yet (started: enabled, on a managed receive queue, and reached in queue order). RC
// retries such a message at the head of its send queue (receiver not ready), so neither it nor
// anything behind it in the FIFO runs until the peer posts the receive. This cross-rank wait is
// what turns a RECV_EN queued behind a send into a deadlock when the peer is in the mirror position.
func (m *machine) rnr(e entry) bool {
	w := m.c.at(e)
	if w.Opcode != ir.OpcSend && w.Opcode != ir.OpcWriteImm {
		return false
	}
	o, ok := m.mate(e)
	return ok && !m.started[o.r][o.q][o.i]
}

// completable reports whether a started entry may complete (earlier ones have, by the caller's
// order; a message needs its other end posted).
func (m *machine) completable(e entry) bool {
	if o, ok := m.mate(e); ok {
		return m.started[o.r][o.q][o.i]
	}
	return true
}

// why says what a blocked entry waits for.
func (m *machine) why(e entry) string {
	c := m.c
	rp := &c.p.Ranks[e.r]
	w := c.at(e)
	s := fmt.Sprintf("%s (%s)", c.name(e), c.opOf(w).Name)
	switch {
	case m.started[e.r][e.q][e.i]:
		if o, ok := m.mate(e); ok {
			s += fmt.Sprintf(" waits for its peer %s to be posted", c.name(o))
		} else {
			s += " started but never completed"
		}
	case w.Opcode == ir.OpcWait:
		cq := &rp.CQs[w.Wait.CQ]
		s += fmt.Sprintf(" waits for %s >= %d, count is %d", cq.Name, w.Wait.At(cq.PerIteration, m.it), m.count[e.r][w.Wait.CQ])
	case rp.Queues[e.q].Managed:
		s += fmt.Sprintf(" not enabled (index %d)", m.enabled[e.r][e.q])
	case m.rnr(e):
		o, _ := m.mate(e)
		s += fmt.Sprintf(" is retried (receiver not ready) until its peer %s is posted", c.name(o))
	}
	return s
}
