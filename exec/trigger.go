package exec

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// Triggered plans on the offload engine: at the start of every iteration the engine hands the
// rank's whole triggered work to the NIC (nic.TriggerContext), thresholds moved by the iteration
// (monotonic re-arm: threshold + iter * the counter's per-iteration amount); then it only polls
// the CQs (statuses, the end of the iteration) and runs the HOST steps whose counter reached
// their threshold, adding one to the host counter after each.
type trigRank struct {
	tc        nic.TriggerContext
	cnt       []nic.Counter // by ir counter
	submitted bool
	hostGate  map[int]int // host chain index -> index in Trig.Work of its TrigOp
	cqs       []trigCQ    // by plan CQ: what says whether polling it can find anything (live)
	// What submitTrig hands the NIC, one piece at a time: an interface's argument escapes, and
	// a fresh one would be allocated per piece of work per iteration.
	tw  nic.TriggeredWR
	swr [1]nic.SendWR
	rwr [1]nic.RecvWR
}

func (e *offloadEngine) setupTrig(or *offRank) error {
	rp := or.rp
	tc, ok := or.res.dev.(nic.TriggerContext)
	if !ok {
		return fmt.Errorf("rank %d: target %s needs a NIC with completion counters and triggered work (nic.TriggerContext)", rp.Rank, e.plan.Target.Name)
	}
	t := &trigRank{tc: tc, hostGate: map[int]int{}}
	for i := range rp.Trig.Counters {
		c := &rp.Trig.Counters[i]
		if c.Kind == ir.CntLand {
			// The counter the region's waits read (newGates bound it to the region): triggered
			// work waits on it as on any counter, and the NIC raises it as writes land.
			k := e.gates.landCounter(rp.Rank, c.Region)
			if k == nil {
				return fmt.Errorf("rank %d: counter %s: no counter is bound to %s", rp.Rank, c.Name, e.g.SliceString(c.Region))
			}
			t.cnt = append(t.cnt, k)
			continue
		}
		k, err := tc.CreateCounter()
		if err != nil {
			return fmt.Errorf("rank %d: counter %s: %w", rp.Rank, c.Name, err)
		}
		t.cnt = append(t.cnt, k)
		if c.Kind == ir.CntSend || c.Kind == ir.CntRecv {
			cq := rp.Queues[c.Queue].CQ
			if cq < 0 || or.cqs[cq].cq == nil {
				return fmt.Errorf("rank %d: counter %s counts work queue %s, which has no CQ", rp.Rank, c.Name, rp.Queues[c.Queue].Name)
			}
			if err := tc.BindCounter(k, or.cqs[cq].cq); err != nil {
				return fmt.Errorf("rank %d: counter %s: %w", rp.Rank, c.Name, err)
			}
		}
	}
	for i := range rp.Trig.Work {
		w := &rp.Trig.Work[i]
		if w.Kind == ir.TrigOp && w.Loc.Queue == rp.Host {
			t.hostGate[w.Loc.Index] = i
		}
	}
	t.cqs = make([]trigCQ, len(rp.CQs))
	for ci := range rp.CQs {
		q := rp.CQs[ci].Queue
		if q < 0 || q >= len(rp.Queues) || q == rp.Host {
			t.cqs[ci].always = true
			continue
		}
		tc := &t.cqs[ci]
		for k := range rp.Queues[q].Chain {
			w := &rp.Queues[q].Chain[k]
			if w.Completes() {
				tc.done = append(tc.done, int32(k))
			} else if w.Opcode.Posted() {
				// An entry that completes silently may still be on its way after the queue's
				// last completion: nothing would say when to stop polling for its sake.
				tc.always = true
			}
		}
		for i := range rp.Trig.Work {
			if w := &rp.Trig.Work[i]; w.Kind == ir.TrigOp && w.Loc.Queue == q {
				tc.ops = append(tc.ops, liveOp{chain: int32(w.Loc.Index), work: int32(i)})
			}
		}
		slices.SortFunc(tc.ops, func(a, b liveOp) int { return cmp.Compare(a.chain, b.chain) })
	}
	or.trig = t
	return nil
}

// trigCQ is what liveCQ needs of one CQ of a triggered rank.
type trigCQ struct {
	always bool     // poll it whenever it owes completions
	done   []int32  // chain indices of the queue's entries that complete on the CQ, in order
	ops    []liveOp // the queue's triggered work, by chain index
}

// liveOp is a queue entry's triggered work: its chain index and its index in Trig.Work.
type liveOp struct{ chain, work int32 }

// liveScan bounds how many of a queue's unfired entries liveCQ reads the counters of; past it the
// CQ counts as idle until the engine's full poll (fullEvery).
const liveScan = 4

// liveCQ reports whether CQ ci of a triggered rank, which owes completions, may produce one or
// needs progress for a peer's sake: an entry of its queue past the last completed one was posted
// at once or its counter reached its threshold, so libfabric has it. A queue whose next entries
// wait for their counters has nothing in flight, and polling its CQ would only make the provider
// look at its sockets.
func (e *offloadEngine) liveCQ(or *offRank, ci int) bool {
	t := or.trig
	tc := &t.cqs[ci]
	if tc.always {
		return true
	}
	c := &or.cqs[ci]
	seen := c.count - uint64(e.iter)*c.per
	if seen >= uint64(len(tc.done)) {
		return true
	}
	from := int32(0) // the first entry that may not have completed
	if seen > 0 {
		from = tc.done[seen-1] + 1
	}
	i, _ := slices.BinarySearchFunc(tc.ops, from, func(o liveOp, k int32) int { return cmp.Compare(o.chain, k) })
	for n := 0; i < len(tc.ops) && n < liveScan; i, n = i+1, n+1 {
		w := &or.rp.Trig.Work[tc.ops[i].work]
		if w.Counter == ir.Untriggered || t.cnt[w.Counter].Value() >= e.threshold(or.rp, w) {
			return true
		}
	}
	return false
}

func (e *offloadEngine) threshold(rp *ir.RankPlan, w *ir.TriggeredOp) uint64 {
	return w.Threshold + uint64(e.iter)*rp.Trig.Counters[w.Counter].PerIteration
}

// submitTrig hands the rank's triggered work for this iteration to the NIC, once.
func (e *offloadEngine) submitTrig(or *offRank) (bool, error) {
	t := or.trig
	if t.submitted {
		return false, t.tc.TriggerErr()
	}
	t.submitted = true
	rp := or.rp
	for i := range rp.Trig.Work {
		w := &rp.Trig.Work[i]
		tw := &t.tw
		*tw = nic.TriggeredWR{}
		switch w.Kind {
		case ir.TrigOp:
			if w.Loc.Queue == rp.Host {
				continue // the CPU runs it (hostTrig)
			}
			o := &or.wqs[w.Loc.Queue]
			tw.QP = o.qp
			if o.recv {
				tw.Kind, tw.Recv = nic.TrigRecv, o.rwr[w.Loc.Index]
			} else {
				tw.Kind, tw.Send = nic.TrigSend, o.swr[w.Loc.Index]
			}
			o.next = len(o.wq.Chain)
			e.posted++
		case ir.TrigAdd, ir.TrigSet:
			tw.Kind, tw.Target, tw.Value = nic.TrigAdd, t.cnt[w.Target], w.Value
			if w.Kind == ir.TrigSet {
				tw.Kind = nic.TrigSet
			}
		}
		var err error
		if w.Counter == ir.Untriggered {
			switch tw.Kind {
			case nic.TrigSend:
				t.swr[0] = tw.Send
				_, err = tw.QP.PostSend(t.swr[:])
			case nic.TrigRecv:
				t.rwr[0] = tw.Recv
				_, err = tw.QP.PostRecv(t.rwr[:])
			case nic.TrigAdd:
				err = tw.Target.Add(tw.Value)
			case nic.TrigSet:
				err = tw.Target.Set(tw.Value)
			}
		} else {
			err = t.tc.Trigger(t.cnt[w.Counter], e.threshold(rp, w), tw)
		}
		if err != nil {
			return true, fmt.Errorf("%s: rank %d: triggered %s for %s: %w", w.Pos, rp.Rank, w.Kind, w.Name, err)
		}
	}
	// Queues with nothing in the chain are done at once.
	for wi := range or.wqs {
		if o := &or.wqs[wi]; !o.host {
			o.next = len(o.wq.Chain)
		}
	}
	return true, t.tc.TriggerErr()
}

// cancelTrig drops the triggered work still waiting on every rank's NIC (CancelTriggers): after
// a failed op, a hang or a cancelled run, libfabric would otherwise go on firing successors,
// errors counting as completions, into queues the run has given up on.
func (e *offloadEngine) cancelTrig() {
	for ri := range e.ranks {
		if t := e.ranks[ri].trig; t != nil {
			t.tc.CancelTriggers()
		}
	}
}

// hostTrig runs HOST entry k once its counter reached its threshold and raises the host counter.
func (e *offloadEngine) hostTrig(or *offRank, k int, h *ir.WQE) (bool, error) {
	t, rp := or.trig, or.rp
	if i, ok := t.hostGate[k]; ok {
		w := &rp.Trig.Work[i]
		if w.Counter != ir.Untriggered && t.cnt[w.Counter].Value() < e.threshold(rp, w) {
			return false, nil
		}
	}
	if e.gates.waits(h.Op) && !e.gates.ready(h.Op) {
		or.gated = true
		return false, nil
	}
	or.gated = false
	if err := e.mem.RunHost(h.Op); err != nil {
		return false, err
	}
	e.hostSteps++
	if rp.Trig.HostCnt >= 0 {
		if err := t.cnt[rp.Trig.HostCnt].Add(1); err != nil {
			return false, err
		}
	}
	return true, nil
}

// diagnoseTrig names, per rank, the triggered work whose counter is short of its threshold: the
// counter, its value, the threshold and the op expected to raise it.
func (e *offloadEngine) diagnoseTrig(h *HangError, iter int) {
	for ri := range e.ranks {
		or := &e.ranks[ri]
		t, rp := or.trig, or.rp
		if t == nil {
			continue
		}
		for i := range rp.Trig.Work {
			w := &rp.Trig.Work[i]
			if w.Counter == ir.Untriggered {
				continue
			}
			v, need := t.cnt[w.Counter].Value(), e.threshold(rp, w)
			if v >= need {
				continue
			}
			c := &rp.Trig.Counters[w.Counter]
			producer := ""
			if c.Kind == ir.CntLand {
				producer = "the writes that land in " + e.g.SliceString(c.Region)
			} else if w.Cause != ir.None {
				producer = e.opRef(w.Cause)
			} else if c.Kind == ir.CntJoin {
				producer = "the counter-adds into " + c.Name
			}
			what := fmt.Sprintf("triggered %s of %s (%s)", w.Kind, w.Name, w.Pos)
			h.Stuck = append(h.Stuck, Stuck{Rank: rp.Rank, Queue: "triggered", CQ: "counter " + c.Name, Reached: v, Awaited: need,
				Unit: c.Kind.Counts(), Producer: producer, What: what})
		}
	}
}
