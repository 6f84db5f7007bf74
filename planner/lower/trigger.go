package lower

import (
	"math"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// Triggered lowering (targets with a TriggerProfile). The chains are those of the generic target
// with every data WQE signalled; the ordering is a list of triggered work per rank:
//
//   - every work queue with a CQ gets a counter of its completions (send side, receive side),
//     and a rank with HOST steps a host counter the CPU raises after each step;
//   - an op waits for conditions "counter >= threshold": each `after` predecessor's completion,
//     on the send side the completion of the previous op of the same side (triggered work has no
//     FIFO, so queue order is enforced as completion order, which also makes every side's
//     completions come in chain order and so a count name exactly one op), the previous HOST
//     step for a HOST step, and for a receive behind a triggered receive of its side the posting
//     of that receive (a post counter raised by an add that fires right after each triggered
//     receive, at the same counter and threshold: equal thresholds fire in submission order);
//   - conditions on one counter keep the highest threshold; no condition: posted when the
//     iteration starts; one: triggered at it; several: a join counter of the op, one counter-add
//     per condition, and the op triggered at the join counter reaching their number;
//   - every region that a wait counts the landed writes of (`wait N writes to REGION`) gets a
//     remote-write counter bound to it (libfabric FI_RMA_EVENT, fi_mr_bind with
//     FI_REMOTE_WRITE), raised by each write that lands there. A NIC op after such a wait does not
//     wait for the wait's HOST step: its conditions are the wait's own, "the region's counter >=
//     N" and the wait's `after` predecessors (those of a wait among them in turn), so the NIC
//     starts it when the count is reached. The wait stays a HOST step, which the CPU holds until
//     the same counter reaches N, for the HOST steps after it. Waits on a memory word stay HOST
//     steps: a NIC threshold is on a counter, not on a word.
//
// Thresholds are cumulative counts for iteration 0; iteration i adds i times the counter's
// PerIteration (monotonic re-arm, see ir/trigger.go).

type gate struct {
	cnt   int
	thr   uint64
	cause ir.OpID
}

func (c *compiler) trigger(order []int32) {
	g := c.g
	var group diag.Group
	start := rankStarts(g) // the order is grouped by rank: each rank reads its own part
	writesTo := writesByTarget(g)
	for r := range c.plan.Ranks {
		rp := &c.plan.Ranks[r]
		tr := &ir.Triggered{SendCnt: make([]int, len(rp.Queues)), HostCnt: -1}
		for wi := range rp.Queues {
			q := &rp.Queues[wi]
			tr.SendCnt[wi] = -1
			if q.CQ < 0 || (q.Kind != ir.SendQueue && q.Kind != ir.RecvQueue) {
				continue
			}
			k := ir.CntSend
			name := q.Name + ".scnt"
			if q.Kind == ir.RecvQueue {
				k, name = ir.CntRecv, q.Name+".rcnt"
			}
			tr.SendCnt[wi] = len(tr.Counters)
			tr.Counters = append(tr.Counters, ir.Counter{Name: name, Kind: k, Queue: wi, Op: ir.None,
				PerIteration: uint64(rp.CQs[q.CQ].PerIteration)})
		}
		// idx[o]: o's completion count on its counter (1-based, iteration 0).
		idx := map[ir.OpID]uint64{}
		for wi := range rp.Queues {
			q := &rp.Queues[wi]
			n := uint64(0)
			for k := range q.Chain {
				e := &q.Chain[k]
				switch {
				case e.Opcode == ir.OpcHost:
					n++
					idx[e.Op] = n
				case e.Completes():
					n++
					if e.Opcode.IsData() {
						idx[e.Op] = n
					}
				}
			}
			if wi == rp.Host && n > 0 {
				tr.HostCnt = len(tr.Counters)
				tr.Counters = append(tr.Counters, ir.Counter{Name: "host.cnt", Kind: ir.CntHost, Queue: wi, Op: ir.None, PerIteration: n})
			}
		}
		landOf := c.landCounters(r, tr, writesTo)
		counterOf := func(o ir.OpID) int {
			if !g.Ops[o].Kind.OnQueue() {
				return tr.HostCnt
			}
			return tr.SendCnt[c.plan.Loc[o].Queue]
		}
		postCnt := map[int]int{} // receive work queue -> its post counter
		posted := map[int]uint64{}
		prevHost := ir.OpID(ir.None)
		for _, ev := range order[start[r]:start[r+1]] {
			if ev&1 != 0 {
				continue
			}
			o := ir.OpID(ev / 2)
			op := &g.Ops[o]
			var gates []gate
			add := func(cnt int, thr uint64, cause ir.OpID) {
				for i := range gates {
					if gates[i].cnt == cnt {
						if thr > gates[i].thr {
							gates[i].thr, gates[i].cause = thr, cause
						}
						return
					}
				}
				gates = append(gates, gate{cnt, thr, cause})
			}
			// seen keeps a wait's conditions from being added twice (waits after waits).
			var seen map[ir.OpID]bool
			var pred func(p ir.OpID)
			pred = func(p ir.OpID) {
				if int(g.Ops[p].Rank) != r {
					group.Add(diag.Errorf(diag.Target, op.Pos, "%s is after %s of rank %d: a counter only counts local completions (target %s)", op.Name, g.Ops[p].Name, g.Ops[p].Rank, c.t.Name), "remote after", r)
					return
				}
				lc, ok := landOf[p]
				if !ok || !op.Kind.OnQueue() {
					add(counterOf(p), idx[p], p)
					return
				}
				if seen[p] {
					return
				}
				if seen == nil {
					seen = map[ir.OpID]bool{}
				}
				seen[p] = true
				add(lc, uint64(g.Ops[p].A()), p)
				for _, q := range g.Preds(p) {
					pred(ir.OpID(q))
				}
			}
			for _, p := range g.Preds(o) {
				pred(ir.OpID(p))
			}
			loc := c.plan.Loc[o]
			recv := op.Kind.IsRecvSide()
			switch {
			case !op.Kind.OnQueue():
				if prevHost != ir.None {
					add(tr.HostCnt, idx[prevHost], prevHost)
				}
				prevHost = o
			case !recv:
				if p := c.prevOnSide(o); p != ir.None {
					add(counterOf(ir.OpID(p)), idx[ir.OpID(p)], ir.OpID(p))
				}
			default:
				if pc, ok := postCnt[loc.Queue]; ok {
					add(pc, posted[loc.Queue], ir.None)
				}
			}
			if recv && len(gates) > 0 && c.t.Trigger.RecvThresholdZero {
				group.Add(diag.Errorf(diag.Target, op.Pos, "%s is a receive that waits for %s: target %s triggers receives only at threshold 0 (receives are posted when the iteration starts), so a receive cannot be held back (drop its `after`, or use another queue or buffer)",
					op.Name, gateText(g, tr, gates), c.t.Name), "held receive", r)
				continue
			}
			base := ir.TriggeredOp{Op: o, Name: op.Name, Pos: op.Pos, Cause: ir.None}
			t := base
			t.Kind, t.Loc, t.Counter = ir.TrigOp, loc, ir.Untriggered
			switch len(gates) {
			case 0:
			case 1:
				t.Counter, t.Threshold, t.Cause = gates[0].cnt, gates[0].thr, gates[0].cause
			default:
				j := len(tr.Counters)
				tr.Counters = append(tr.Counters, ir.Counter{Name: "join." + op.Name, Kind: ir.CntJoin, Queue: -1, Op: o, PerIteration: uint64(len(gates))})
				for _, gt := range gates {
					a := base
					a.Kind, a.Counter, a.Threshold, a.Target, a.Value, a.Cause = ir.TrigAdd, gt.cnt, gt.thr, j, 1, gt.cause
					tr.Work = append(tr.Work, a)
				}
				t.Counter, t.Threshold = j, uint64(len(gates))
			}
			tr.Work = append(tr.Work, t)
			if recv && t.Counter != ir.Untriggered {
				pc, ok := postCnt[loc.Queue]
				if !ok {
					pc = len(tr.Counters)
					postCnt[loc.Queue] = pc
					tr.Counters = append(tr.Counters, ir.Counter{Name: rp.Queues[loc.Queue].Name + ".post", Kind: ir.CntPost, Queue: loc.Queue, Op: ir.None})
				}
				posted[loc.Queue]++
				tr.Counters[pc].PerIteration++
				a := base
				a.Kind, a.Counter, a.Threshold, a.Target, a.Value, a.Cause = ir.TrigAdd, t.Counter, t.Threshold, pc, 1, t.Cause
				tr.Work = append(tr.Work, a)
			}
		}
		rp.Trig = tr
	}
	c.checkTriggerBudget(&group)
	c.errs = append(c.errs, group.List(len(c.plan.Ranks))...)
}

// writesByTarget lists, by rank, the writes that land in its memory; nil when the plan has no
// wait for landed writes.
func writesByTarget(g *ir.Graph) [][]ir.OpID {
	any := false
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpWait && !op.WaitsWord() {
			any = true
			break
		}
	}
	if !any {
		return nil
	}
	out := make([][]ir.OpID, g.Ranks)
	for i := range g.Ops {
		if op := &g.Ops[i]; op.Kind == ir.OpWrite {
			peer := g.Queues[op.Queue].PeerRank
			out[peer] = append(out[peer], ir.OpID(i))
		}
	}
	return out
}

// landCounters adds to tr a remote-write counter for each region that a wait of rank r counts
// the landed writes of, in the order of the waits, and returns the counter of each such wait.
// A counter rises by the writes that land wholly inside its region in an iteration (the checks
// refuse a write that straddles a counted region's edge).
func (c *compiler) landCounters(r int, tr *ir.Triggered, writesTo [][]ir.OpID) map[ir.OpID]int {
	if writesTo == nil {
		return nil
	}
	g := c.g
	out := map[ir.OpID]int{}
	byRegion := map[ir.Slice]int{}
	first, end := g.RankOps(r)
	for o := first; o < end; o++ {
		op := &g.Ops[o]
		if op.Kind != ir.OpWait || op.WaitsWord() {
			continue
		}
		k, ok := byRegion[op.Dst]
		if !ok {
			var n uint64
			for _, w := range writesTo[r] {
				n += uint64(g.LandWeight(w, r, op.Dst, false))
			}
			k = len(tr.Counters)
			byRegion[op.Dst] = k
			tr.Counters = append(tr.Counters, ir.Counter{Name: g.SliceString(op.Dst) + ".land", Kind: ir.CntLand, Queue: -1, Op: o,
				Region: op.Dst, PerIteration: n})
		}
		out[o] = k
	}
	return out
}

func gateText(g *ir.Graph, tr *ir.Triggered, gates []gate) string {
	s := ""
	for i, gt := range gates {
		if i > 0 {
			s += " and "
		}
		s += tr.Counters[gt.cnt].Name
		if gt.cause != ir.None {
			s += " (" + g.Ops[gt.cause].Name + ")"
		}
	}
	return s
}

// checkTriggerBudget refuses plans whose triggered work or counters exceed the profile, and
// counters that pass the profile's MaxCounter in the first iteration. Like checkLimits, a
// mistake made on many ranks is one diagnostic, worded with the largest need.
func (c *compiler) checkTriggerBudget(group *diag.Group) {
	p := c.t.Trigger
	var found limitFinds
	add := found.add
	for r := range c.plan.Ranks {
		rp := &c.plan.Ranks[r]
		tr := rp.Trig
		if tr == nil {
			continue
		}
		if p.MaxCounters > 0 && len(tr.Counters) > p.MaxCounters {
			k := p.MaxCounters // the first counter past the limit
			add(r, len(tr.Counters), c.counterPos(rp, k), "counter %s is one too many: the rank needs %d counters, above the %d per rank of target %s (profile figure MaxCounters%s; fewer queues, fewer regions whose landed writes a wait counts, or fewer ops that wait for two things need fewer)",
				tr.Counters[k].Name, len(tr.Counters), p.MaxCounters, c.t.Name, guessNote(p, ir.FigMaxCounters))
		}
		for k, n := range tr.AllIterations(p.MaxCounter) {
			if n == 0 {
				add(r, int(min(tr.Counters[k].PerIteration, math.MaxInt32)), c.counterPos(rp, k), "counter %s passes %d in the first iteration, the largest value target %s's counters hold (profile figure MaxCounter%s)",
					tr.Counters[k].Name, p.MaxCounter, c.t.Name, guessNote(p, ir.FigMaxCounter))
			}
		}
		if p.MaxOutstanding <= 0 {
			continue
		}
		units, total, over := 0, 0, -1
		for i := range tr.Work {
			units += p.Units(rp, &tr.Work[i])
			if units > p.MaxOutstanding && over < 0 {
				over, total = i, units
			}
		}
		if over >= 0 {
			w := &tr.Work[over]
			add(r, units, w.Pos, "%s: the rank's triggered work passes %d units here (%d per iteration in all), above the %d outstanding triggered operations of target %s (profile figure MaxOutstanding%s; counter work costs %d): split the plan, or order fewer ops by `after`",
				w.Name, total, units, p.MaxOutstanding, c.t.Name, guessNote(p, ir.FigMaxOutstanding), p.WorkCost())
		}
	}
	found.addTo(group)
}

// guessNote is ", a guess" for a profile figure that is not a documented provider figure.
func guessNote(p *ir.TriggerProfile, f ir.Figure) string {
	if p.Guess(f) {
		return ", a guess"
	}
	return ""
}

// counterPos is where counter k of rank plan rp comes from: the op of a join counter, the
// graph queue of a queue's counter, else the first entry of the work queue it counts.
func (c *compiler) counterPos(rp *ir.RankPlan, k int) diag.Pos {
	cnt := &rp.Trig.Counters[k]
	if cnt.Kind == ir.CntJoin || cnt.Kind == ir.CntLand {
		return c.g.Ops[cnt.Op].Pos
	}
	if cnt.Queue >= 0 {
		q := &rp.Queues[cnt.Queue]
		if q.Queue != ir.None {
			return c.g.Queues[q.Queue].Pos
		}
		if len(q.Chain) > 0 {
			return c.g.Ops[q.Chain[0].Op].Pos
		}
	}
	return diag.InFile(c.g.File)
}
