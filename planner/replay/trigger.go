package replay

import (
	"context"
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// Triggered plans (RankPlan.Trig). The check reads only the Graph, the chains and each rank's
// counters, thresholds and triggered work, and does not reuse the lowering's reasoning:
//
//   - Raisers: per counter, the events that raise it and by how much: the completions of the
//     work queue a send or receive counter is bound to, the HOST steps for the host counter (the
//     CPU adds one after each), and the counter-add work aimed at it. One iteration's sum must
//     equal the counter's PerIteration, and every threshold T must satisfy 1 <= T <= PerIteration:
//     then iteration i+1's threshold T + (i+1)*P exceeds the (i+1)*P that iterations 0..i raise,
//     so no entry fires on an earlier iteration's counts, and every entry can fire within its
//     own iteration. A counter-set, which breaks monotonic re-arm, is refused.
//   - Necessity: per rank, the relation "event x has happened before event y, in every
//     execution" over the events start(op), done(op) and fire(counter work), as the least
//     fixpoint of sound rules: an op completes after it starts; a receive completes after every
//     receive posted before it on its queue (RC consumes receives in posting order); work posted
//     at once is posted in submission order, before any later entry is submitted; work on one
//     counter fires in threshold order and equal thresholds in submission order; and when an
//     entry fires, its counter holds at least T, so a raiser e has happened if the raisers that
//     can happen without e (and without the entry itself having fired) sum to less than T.
//   - Every `after` edge a -> b needs done(a) before start(b); the queue order the plan relies
//     on needs, on a send side, the previous op's completion before each op starts (there is no
//     FIFO between triggered work, so counts name ops only if completions come in chain order),
//     on a receive side the previous receive posted before each (messages meet receives in
//     posting order), and for HOST steps the previous step done before each.
//   - Progress: one iteration is executed abstractly over all ranks (messages meet the peer's
//     receives k-th with k-th, a send side completes in posting order); every op must complete
//     and every entry fire.
//   - Remote-write counters (ir.CntLand) are raised by other ranks' writes, which no event of
//     the rank stands for: such a counter must count a remote_write region of the rank, and
//     re-arm by the writes that land wholly inside it per iteration, counted from the Graph. An
//     `after` edge from a wait for landed writes w to a NIC op b is enforced without w's HOST
//     step when b's start needs an entry on a counter of w's region (or of a part of it) at a
//     threshold of at least w's count, and the completion of each of w's own predecessors
//     (through waits of the same kind in turn). In the progress execution a write raises the
//     counters of its target's regions it lands in when it completes, and such a wait's HOST
//     step completes once its region's counter holds its count.

// trigRank holds the analysis of one rank.
type trigRank struct {
	c     *checker
	r     int
	tr    *ir.Triggered
	first ir.OpID // rank's ops are [first, end)
	nOps  int
	// work[k] is the event of Trig.Work[k]: start(op) for a TrigOp, fire(k) for counter work.
	work []int
	// opWork[local op] is the index of the op's TrigOp, -1 if none.
	opWork []int
	// raisers[c]: the events that raise counter c, with their amounts.
	raisers [][]raiser
	before  []bitset
	words   int
	// land lists the rank's remote-write counters (ir.CntLand).
	land []int
}

type raiser struct {
	ev   int
	amt  uint64
	need uint64 // what the counter must hold before ev can happen (a lower bound)
}

// needs returns, per counter, its raisers with a lower bound of the counter's value before each
// can happen (the thresholds on that counter of the entries it waits for, and the amounts of the
// raisers known to precede it), sorted by that bound.
func (t *trigRank) needs() [][]raiser {
	out := make([][]raiser, len(t.raisers))
	for c, rs := range t.raisers {
		l := append([]raiser(nil), rs...)
		for i := range l {
			ev := l[i].ev
			sum, need := uint64(0), uint64(0)
			for _, o := range rs {
				if t.before[ev].has(o.ev) {
					sum += o.amt
				}
			}
			for k := range t.tr.Work {
				w := &t.tr.Work[k]
				if w.Counter == c && (t.work[k] == ev || t.before[ev].has(t.work[k])) {
					need = max(need, w.Threshold)
				}
			}
			l[i].need = max(sum, need)
		}
		sort.Slice(l, func(i, j int) bool { return l[i].need < l[j].need })
		out[c] = l
	}
	return out
}

type bitset []uint64

func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// or adds x and everything before x to b; it reports a change.
func (b bitset) addWith(x int, bx bitset) bool {
	changed := false
	if !b.has(x) {
		b[x/64] |= 1 << (x % 64)
		changed = true
	}
	for i, w := range bx {
		if n := b[i] | w; n != b[i] {
			b[i], changed = n, true
		}
	}
	return changed
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func (t *trigRank) start(o ir.OpID) int { return 2 * int(o-t.first) }
func (t *trigRank) done(o ir.OpID) int  { return 2*int(o-t.first) + 1 }
func (t *trigRank) fire(k int) int      { return 2*t.nOps + k }

func (t *trigRank) evName(ev int) string {
	g := t.c.g
	if ev >= 2*t.nOps {
		w := &t.tr.Work[ev-2*t.nOps]
		return fmt.Sprintf("the %s into %s of %s", w.Kind, t.cntName(w.Target), w.Name)
	}
	o := t.first + ir.OpID(ev/2)
	if ev%2 == 0 {
		return "the start of " + g.Ops[o].Name
	}
	return "the completion of " + g.Ops[o].Name
}

func (t *trigRank) cntName(k int) string {
	if k >= 0 && k < len(t.tr.Counters) {
		return t.tr.Counters[k].Name
	}
	return fmt.Sprintf("counter %d", k)
}

// checkTriggered runs the triggered checks on every rank, then the progress execution. Past
// Options.TriggeredWork, only the triggered forms are validated (newTrigRank). Once ctx is
// cancelled, the ranks left are not proven, nor is the progress.
func (c *checker) checkTriggered(ctx context.Context) {
	prove := c.opt.TriggeredWork <= 0 || TriggeredWork(c.p) <= c.opt.TriggeredWork
	var ranks []*trigRank
	for r := range c.p.Ranks {
		rp := &c.p.Ranks[r]
		if rp.Trig == nil {
			c.errorf(c.pos(), "rank %d has no triggered form, but target %s is triggered", r, c.p.Target.Name)
			return
		}
		if stop.Cause(ctx) != nil {
			return
		}
		t := c.newTrigRank(r)
		if t == nil || !prove {
			continue
		}
		t.necessity()
		t.checkEdges()
		ranks = append(ranks, t)
	}
	if len(c.errs) == 0 && prove {
		c.trigProgress(ctx, ranks)
	}
}

// TriggeredWork is the most triggered work entries of a rank of p (0 for a plan that is not
// triggered): what the triggered proof costs grows with its cube.
func TriggeredWork(p *ir.Plan) int {
	n := 0
	for r := range p.Ranks {
		if tr := p.Ranks[r].Trig; tr != nil {
			n = max(n, len(tr.Work))
		}
	}
	return n
}

func (c *checker) pos() diag.Pos { return diag.InFile(c.g.File) }

// newTrigRank validates the rank's triggered form and collects the raisers; nil on errors.
func (c *checker) newTrigRank(r int) *trigRank {
	g, rp := c.g, &c.p.Ranks[r]
	tr := rp.Trig
	first, end := g.RankOps(r)
	t := &trigRank{c: c, r: r, tr: tr, first: first, nOps: int(end - first)}
	nerr := len(c.errs)
	t.opWork = make([]int, t.nOps)
	for i := range t.opWork {
		t.opWork[i] = -1
	}
	nc := len(tr.Counters)
	t.raisers = make([][]raiser, nc)
	t.work = make([]int, len(tr.Work))
	for k := range tr.Work {
		w := &tr.Work[k]
		if w.Counter != ir.Untriggered && (w.Counter < 0 || w.Counter >= nc) {
			c.errorf(w.Pos, "rank %d: triggered %s of %s waits on counter %d, which does not exist", r, w.Kind, w.Name, w.Counter)
			continue
		}
		switch w.Kind {
		case ir.TrigOp:
			if w.Op < first || w.Op >= end {
				c.errorf(w.Pos, "rank %d: triggered op %s is not an op of the rank", r, w.Name)
				continue
			}
			if c.p.Loc[w.Op] != w.Loc {
				c.errorf(w.Pos, "rank %d: triggered op %s starts the entry at %s[%d], but the op is at %s[%d]", r, w.Name,
					rp.Queues[w.Loc.Queue].Name, w.Loc.Index, rp.Queues[c.p.Loc[w.Op].Queue].Name, c.p.Loc[w.Op].Index)
				continue
			}
			l := int(w.Op - first)
			if t.opWork[l] >= 0 {
				c.errorf(w.Pos, "rank %d: %s is triggered twice", r, w.Name)
				continue
			}
			t.opWork[l] = k
			t.work[k] = t.start(w.Op)
		case ir.TrigAdd:
			if w.Target < 0 || w.Target >= nc {
				c.errorf(w.Pos, "rank %d: counter-add of %s aims at counter %d, which does not exist", r, w.Name, w.Target)
				continue
			}
			if w.Value == 0 {
				c.errorf(w.Pos, "rank %d: counter-add of %s into %s adds nothing", r, w.Name, t.cntName(w.Target))
			}
			t.work[k] = t.fire(k)
			t.raisers[w.Target] = append(t.raisers[w.Target], raiser{ev: t.fire(k), amt: w.Value})
		default:
			c.errorf(w.Pos, "rank %d: %s of %s into %s: a counter-set breaks the monotonic re-arm of thresholds; the replay cannot prove plans that use it", r, w.Kind, w.Name, t.cntName(w.Target))
		}
	}
	for o := first; o < end; o++ {
		if t.opWork[o-first] < 0 {
			c.errorf(g.Ops[o].Pos, "rank %d: %s has no triggered entry: nothing ever starts it", r, g.Ops[o].Name)
		}
	}
	// Counters bound to completions, and the host counter.
	for k := range tr.Counters {
		cn := &tr.Counters[k]
		switch cn.Kind {
		case ir.CntSend, ir.CntRecv:
			if cn.Queue < 0 || cn.Queue >= len(rp.Queues) || rp.Queues[cn.Queue].CQ < 0 {
				c.errorf(c.pos(), "rank %d: counter %s counts work queue %d, which has no CQ", r, cn.Name, cn.Queue)
				continue
			}
			wq := &rp.Queues[cn.Queue]
			if (cn.Kind == ir.CntRecv) != (wq.Kind == ir.RecvQueue) {
				c.errorf(c.pos(), "rank %d: %s counter %s is bound to %s", r, cn.Kind, cn.Name, wq.Name)
			}
			for i := range wq.Chain {
				e := &wq.Chain[i]
				if !e.Completes() {
					continue
				}
				if !isData(e.Opcode) {
					c.errorf(c.opOf(e).Pos, "rank %d %s[%d]: %s completes but is no graph op; the replay models only data entries in triggered chains", r, wq.Name, i, e.Opcode)
					continue
				}
				t.raisers[k] = append(t.raisers[k], raiser{ev: t.done(e.Op), amt: 1})
			}
		case ir.CntHost:
			if k != tr.HostCnt {
				c.errorf(c.pos(), "rank %d: host counter %s is not the rank's host counter", r, cn.Name)
			}
		case ir.CntLand:
			reg := cn.Region
			if reg.Buf < 0 || int(reg.Buf) >= len(g.Buffers) || reg.Len <= 0 || reg.Off < 0 || reg.Off+reg.Len > g.Buffers[reg.Buf].Count ||
				g.Buffers[reg.Buf].Access&ir.RemoteWrite == 0 {
				c.errorf(c.pos(), "rank %d: remote-write counter %s counts no region of a remote_write buffer", r, cn.Name)
				continue
			}
			if n := uint64(g.Landing(r, reg, false)); n != cn.PerIteration {
				c.errorf(c.pos(), "rank %d: counter %s re-arms by %d per iteration, but %d writes land in %s per iteration", r, cn.Name, cn.PerIteration, n, g.SliceString(reg))
			}
			t.land = append(t.land, k)
		}
	}
	if tr.HostCnt >= 0 {
		if tr.HostCnt >= nc {
			c.errorf(c.pos(), "rank %d: host counter %d does not exist", r, tr.HostCnt)
		} else {
			for o := first; o < end; o++ {
				if !g.Ops[o].Kind.OnQueue() {
					t.raisers[tr.HostCnt] = append(t.raisers[tr.HostCnt], raiser{ev: t.done(o), amt: 1})
				}
			}
		}
	}
	// Per-iteration amounts and thresholds: no firing across iterations.
	for k := range tr.Counters {
		cn := &tr.Counters[k]
		if cn.Kind == ir.CntLand {
			continue // raised by other ranks' writes, counted above
		}
		sum := uint64(0)
		for _, rs := range t.raisers[k] {
			sum += rs.amt
		}
		switch {
		case sum > cn.PerIteration:
			c.errorf(c.pos(), "rank %d: counter %s rises by %d per iteration but re-arms by %d: iteration i's counts reach iteration i+1's thresholds early", r, cn.Name, sum, cn.PerIteration)
		case sum < cn.PerIteration:
			c.errorf(c.pos(), "rank %d: counter %s rises by %d per iteration but re-arms by %d: later iterations wait for counts that never come", r, cn.Name, sum, cn.PerIteration)
		}
	}
	for k := range tr.Work {
		w := &tr.Work[k]
		if w.Counter == ir.Untriggered || w.Counter >= nc {
			continue
		}
		p := tr.Counters[w.Counter].PerIteration
		if w.Threshold == 0 {
			c.errorf(w.Pos, "rank %d: triggered %s of %s waits for %s >= 0: from iteration 1 on the previous iteration's counts fire it early", r, w.Kind, w.Name, t.cntName(w.Counter))
		} else if w.Threshold > p {
			c.errorf(w.Pos, "rank %d: triggered %s of %s waits for %s >= %d, above the %d one iteration raises: it fires only on the next iteration's counts", r, w.Kind, w.Name, t.cntName(w.Counter), w.Threshold, p)
		}
	}
	if len(c.errs) > nerr {
		return nil
	}
	return t
}

// necessity computes t.before as the least fixpoint of the rules.
func (t *trigRank) necessity() {
	g, rp, tr := t.c.g, &t.c.p.Ranks[t.r], t.tr
	n := 2*t.nOps + len(tr.Work)
	t.words = (n + 63) / 64
	t.before = make([]bitset, n)
	for i := range t.before {
		t.before[i] = make(bitset, t.words)
	}
	hostWork := func(k int) bool { w := &tr.Work[k]; return w.Kind == ir.TrigOp && w.Loc.Queue == rp.Host }
	// Receives of each receive side, in chain order.
	var recvs [][]ir.OpID
	for q := range rp.Queues {
		if rp.Queues[q].Kind != ir.RecvQueue {
			continue
		}
		var l []ir.OpID
		for i := range rp.Queues[q].Chain {
			if e := &rp.Queues[q].Chain[i]; e.Opcode == ir.OpcRecv {
				l = append(l, e.Op)
			}
		}
		recvs = append(recvs, l)
	}
	for changed := true; changed; {
		changed = false
		sorted := t.needs()
		for k := range tr.Work {
			w := &tr.Work[k]
			ev := t.work[k]
			b := t.before[ev]
			if !hostWork(k) {
				// Submission order: work posted at once precedes everything submitted after it;
				// on one counter, lower-or-equal thresholds submitted earlier fire first.
				for j := 0; j < k; j++ {
					if hostWork(j) {
						continue
					}
					wj := &tr.Work[j]
					if wj.Counter == ir.Untriggered || (w.Counter != ir.Untriggered && wj.Counter == w.Counter && wj.Threshold <= w.Threshold) {
						if b.addWith(t.work[j], t.before[t.work[j]]) {
							changed = true
						}
					}
				}
			}
			if w.Counter != ir.Untriggered {
				rs := sorted[w.Counter]
				for _, e := range rs {
					if b.has(e.ev) {
						if b.addWith(e.ev, t.before[e.ev]) {
							changed = true // what precedes e grew
						}
						continue
					}
					// The most the counter can reach without e: raisers that need neither e nor
					// this entry, taken while what they need of the counter is available.
					avail := uint64(0)
					for _, o := range rs {
						if o.ev == e.ev || o.ev == ev || t.before[o.ev].has(e.ev) || t.before[o.ev].has(ev) {
							continue
						}
						if o.need > avail {
							break
						}
						avail += o.amt
					}
					if avail < w.Threshold {
						if b.addWith(e.ev, t.before[e.ev]) {
							changed = true
						}
					}
				}
			}
		}
		for o := t.first; o < t.first+ir.OpID(t.nOps); o++ {
			if t.before[t.done(o)].addWith(t.start(o), t.before[t.start(o)]) {
				changed = true
			}
		}
		for _, l := range recvs {
			for i, a := range l {
				for _, b := range l[i+1:] {
					if t.before[t.start(b)].has(t.start(a)) && t.before[t.done(b)].addWith(t.done(a), t.before[t.done(a)]) {
						changed = true
					}
				}
			}
		}
	}
	for ev := range t.before {
		if t.before[ev].has(ev) {
			t.c.errorf(g.Ops[t.first].Pos, "rank %d: %s can happen only after itself: the triggered work deadlocks", t.r, t.evName(ev))
			return
		}
	}
}

// checkEdges checks every `after` edge into the rank and the queue order.
func (t *trigRank) checkEdges() {
	g, rp := t.c.g, &t.c.p.Ranks[t.r]
	end := t.first + ir.OpID(t.nOps)
	for _, e := range g.Edges {
		if e.To < t.first || e.To >= end {
			continue
		}
		if e.From < t.first || e.From >= end {
			t.c.errorf(e.Pos, "edge %s -> %s crosses ranks: a counter counts only local completions", g.OpString(e.From), g.Ops[e.To].Name)
			continue
		}
		if !t.before[t.start(e.To)].has(t.done(e.From)) && !(g.Ops[e.To].Kind.OnQueue() && t.waitHolds(e.From, t.start(e.To), 0)) {
			t.c.errorf(e.Pos, "edge %s -> %s is not enforced: on rank %d the triggered work lets %s start before %s completes (%s)",
				g.OpString(e.From), g.Ops[e.To].Name, t.r, g.Ops[e.To].Name, g.Ops[e.From].Name, t.gateText(e.To))
		}
	}
	for q := range rp.Queues {
		wq := &rp.Queues[q]
		prev := ir.OpID(ir.None)
		for i := range wq.Chain {
			e := &wq.Chain[i]
			if !isData(e.Opcode) && e.Opcode != ir.OpcHost {
				continue
			}
			if prev != ir.None {
				need, what := t.done(prev), "completes"
				if wq.Kind == ir.RecvQueue {
					need, what = t.start(prev), "is posted"
				}
				if !t.before[t.start(e.Op)].has(need) {
					t.c.errorf(g.Ops[e.Op].Pos, "queue order of rank %d %s is not enforced: %s can start before %s %s (%s)",
						t.r, wq.Name, g.Ops[e.Op].Name, g.Ops[prev].Name, what, t.gateText(e.Op))
				}
			}
			prev = e.Op
		}
	}
}

// waitHolds reports whether event ev happens only once the condition of wait w holds: w counts
// the writes that land in a region, and ev needs an entry on a remote-write counter of that
// region, or of a part of it, at w's count or more, and the completion of each of w's
// predecessors (or, for a wait for landed writes among them, its condition in turn). depth bounds
// the walk through waits after waits.
func (t *trigRank) waitHolds(w ir.OpID, ev, depth int) bool {
	g := t.c.g
	op := &g.Ops[w]
	if op.Kind != ir.OpWait || op.WaitsWord() || depth > t.nOps {
		return false
	}
	reached := false
	for _, c := range t.land {
		reg := t.tr.Counters[c].Region
		if reg.Buf != op.Dst.Buf || reg.Off < op.Dst.Off || reg.Off+reg.Len > op.Dst.Off+op.Dst.Len {
			continue
		}
		for k := range t.tr.Work {
			x := &t.tr.Work[k]
			if x.Counter == c && x.Threshold >= uint64(op.A()) && (t.work[k] == ev || t.before[ev].has(t.work[k])) {
				reached = true
				break
			}
		}
		if reached {
			break
		}
	}
	if !reached {
		return false
	}
	for _, p := range g.Preds(w) {
		p := ir.OpID(p)
		if !t.before[ev].has(t.done(p)) && !t.waitHolds(p, ev, depth+1) {
			return false
		}
	}
	return true
}

func (t *trigRank) gateText(o ir.OpID) string {
	k := t.opWork[o-t.first]
	w := &t.tr.Work[k]
	if w.Counter == ir.Untriggered {
		return "it is posted when the iteration starts"
	}
	return fmt.Sprintf("it waits for %s >= %d", t.cntName(w.Counter), w.Threshold)
}

// trigProgress executes one iteration of every rank abstractly: work fires when its counter
// reaches its threshold; a send-side op completes once every op posted before it on its side
// did and, for a message, the peer's matching receive is posted; a receive completes once its
// message's send did; a HOST step completes when it starts. It stops, reporting nothing, once
// ctx is cancelled.
func (c *checker) trigProgress(ctx context.Context, ranks []*trigRank) {
	g := c.g
	partner := map[ir.OpID]ir.OpID{}
	for _, pr := range c.messages() {
		s, r := c.at(pr[0]).Op, c.at(pr[1]).Op
		partner[s], partner[r] = r, s
	}
	type rankState struct {
		cnt   []uint64
		fired []bool
		seq   [][]ir.OpID // per work queue: ops in posting order
	}
	started := make([]bool, len(g.Ops))
	done := make([]bool, len(g.Ops))
	st := make([]rankState, len(ranks))
	for i, t := range ranks {
		st[i] = rankState{cnt: make([]uint64, len(t.tr.Counters)), fired: make([]bool, len(t.tr.Work)),
			seq: make([][]ir.OpID, len(c.p.Ranks[t.r].Queues))}
	}
	at := map[int]int{} // rank -> index in ranks
	for i, t := range ranks {
		at[t.r] = i
	}
	// holds reports whether wait o's region counter has reached its count (true for any other
	// host op, and for a wait whose region has no counter: the replay models no other condition).
	holds := func(i int, o ir.OpID) bool {
		op := &g.Ops[o]
		if op.Kind != ir.OpWait || op.WaitsWord() {
			return true
		}
		t := ranks[i]
		for _, k := range t.land {
			if t.tr.Counters[k].Region == op.Dst {
				return st[i].cnt[k] >= uint64(op.A())
			}
		}
		return true
	}
	raise := func(i int, o ir.OpID) {
		t := ranks[i]
		for k := range t.raisers {
			for _, rs := range t.raisers[k] {
				if rs.ev == t.done(o) {
					st[i].cnt[k] += rs.amt
				}
			}
		}
		// A write lands in its target's memory when it completes.
		if op := &g.Ops[o]; op.Kind == ir.OpWrite {
			if j, ok := at[g.Queues[op.Queue].PeerRank]; ok {
				for _, k := range ranks[j].land {
					if op.Dst.Within(ranks[j].tr.Counters[k].Region) {
						st[j].cnt[k]++
					}
				}
			}
		}
	}
	held := make([][]ir.OpID, len(ranks)) // HOST waits started whose count is not reached
	poll := stop.Every(ctx, pollSteps)
	for changed := true; changed; {
		changed = false
		for i, t := range ranks {
			if poll.Step() != nil {
				return
			}
			s := &st[i]
			for k := range t.tr.Work {
				w := &t.tr.Work[k]
				if s.fired[k] || (w.Counter != ir.Untriggered && s.cnt[w.Counter] < w.Threshold) {
					continue
				}
				s.fired[k], changed = true, true
				if w.Kind == ir.TrigAdd {
					s.cnt[w.Target] += w.Value
					continue
				}
				started[w.Op] = true
				if !g.Ops[w.Op].Kind.OnQueue() {
					held[i] = append(held[i], w.Op)
					continue
				}
				s.seq[w.Loc.Queue] = append(s.seq[w.Loc.Queue], w.Op)
			}
			keep := held[i][:0]
			for _, o := range held[i] {
				if !holds(i, o) {
					keep = append(keep, o)
					continue
				}
				done[o], changed = true, true
				raise(i, o)
			}
			held[i] = keep
			for q, l := range s.seq {
				recv := c.p.Ranks[t.r].Queues[q].Kind == ir.RecvQueue
				for _, o := range l {
					if done[o] {
						continue
					}
					p, msg := partner[o]
					if recv && (!msg || !done[p]) || !recv && msg && !started[p] {
						if !recv {
							break // FIFO: nothing behind it completes
						}
						continue
					}
					done[o], changed = true, true
					raise(i, o)
				}
			}
		}
	}
	var stuck []string
	for i, t := range ranks {
		for k := range t.tr.Work {
			if st[i].fired[k] {
				continue
			}
			w := &t.tr.Work[k]
			stuck = append(stuck, fmt.Sprintf("rank %d %s of %s waits for %s >= %d, which stays at %d", t.r, w.Kind, w.Name, t.cntName(w.Counter), w.Threshold, st[i].cnt[w.Counter]))
		}
	}
	for o := range g.Ops {
		if started[o] && !done[o] {
			stuck = append(stuck, fmt.Sprintf("rank %d %s is posted but never completes", g.Ops[o].Rank, g.Ops[o].Name))
		}
	}
	if len(stuck) > 0 {
		if len(stuck) > 8 {
			stuck = append(stuck[:8], fmt.Sprintf("... (%d more)", len(stuck)-8))
		}
		c.errorf(c.pos(), "the triggered work blocks forever: %s", strings.Join(stuck, "; "))
	}
}
