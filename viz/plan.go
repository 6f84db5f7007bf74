package viz

import (
	"fmt"
	"strings"

	"github.com/emicklei/dot"

	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// Plan draws the plan view of a compiled plan: per rank a cluster, inside it one lane per work
// queue with its WQEs in chain order from left to right. A CQE_WAIT gets a dashed edge from the
// WQE whose completion it counts; SEND_EN/RECV_EN an edge to the last WQE they release; HOST steps
// (drawn grey, octagonal) get dotted edges from the completions the CPU waits for. Signalled WQEs
// have a double border. Matched transfers are linked across ranks by light dashed edges. A
// triggered plan's counters get a lane of their own, each counter an ellipse with the
// completions or landings that raise it and the work it fires at its thresholds (drawCounters).
//
// Above the node limit the middle of long lanes folds into summary nodes (the first and last
// entries and highlighted ones stay), then whole ranks fold into one node each.
func Plan(p *ir.Plan, opts Options) *dot.Graph {
	v := &planView{p: p, g: p.Graph, opts: opts}
	v.layout()
	return v.draw()
}

// Lane folding keeps the first laneHead and last laneTail entries of a lane.
const (
	laneHead = 3
	laneTail = 2
)

// pnode is one node of the plan view: a WQE, a folded run of a lane, or a folded rank.
type pnode struct {
	rank, queue int // queue -1: rank summary
	lo, hi      int // chain entries [lo, hi); hi == lo+1 for a single WQE
	single      bool
}

type planView struct {
	p     *ir.Plan
	g     *ir.Graph
	opts  Options
	nodes []pnode
	// rep[rank][queue][index] is the pnode of a chain entry (-1: not drawn).
	rep      [][][]int32
	expanded []bool          // by rank: its lanes are drawn (not folded into one node)
	hl       map[WQERef]bool // lookup only
}

func (v *planView) layout() {
	p := v.p
	v.hl = make(map[WQERef]bool, len(v.opts.Highlight.WQEs))
	for _, h := range v.opts.Highlight.WQEs {
		v.hl[h] = true
	}
	var selected []int
	total := 0
	for r := range p.Ranks {
		if v.opts.drawsRank(r) {
			selected = append(selected, r)
			total += rankEntries(&p.Ranks[r])
		}
	}
	limit := v.opts.limit()
	fold := !v.opts.Full && total > limit
	// After folding lanes, count again; fold whole ranks (all but the first selected) if needed.
	lanesFolded := func(r int) int {
		n := 0
		for qi := range p.Ranks[r].Queues {
			n += len(v.laneRuns(r, qi, fold))
		}
		return n
	}
	expanded := make([]bool, len(p.Ranks))
	for _, r := range selected {
		expanded[r] = true
	}
	if fold && len(selected) > 1 {
		used := lanesFolded(selected[0])
		folding := false
		for i, r := range selected[1:] {
			after := len(selected) - 2 - i
			need := lanesFolded(r)
			if folding || used+need+after > limit {
				folding = true
				expanded[r] = false
				used++
				continue
			}
			used += need
		}
	}
	v.expanded = expanded
	v.rep = make([][][]int32, len(p.Ranks))
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		v.rep[r] = make([][]int32, len(rp.Queues))
		summary := int32(-1)
		if !expanded[r] {
			summary = int32(len(v.nodes))
			v.nodes = append(v.nodes, pnode{rank: r, queue: -1})
		}
		for qi := range rp.Queues {
			chain := rp.Queues[qi].Chain
			rep := make([]int32, len(chain))
			v.rep[r][qi] = rep
			if !expanded[r] {
				for i := range rep {
					rep[i] = summary
				}
				continue
			}
			for _, run := range v.laneRuns(r, qi, fold) {
				id := int32(len(v.nodes))
				v.nodes = append(v.nodes, pnode{rank: r, queue: qi, lo: run[0], hi: run[1], single: run[1]-run[0] == 1})
				for i := run[0]; i < run[1]; i++ {
					rep[i] = id
				}
			}
		}
	}
}

// rankEntries counts the chain entries of a rank.
func rankEntries(rp *ir.RankPlan) int {
	n := 0
	for qi := range rp.Queues {
		n += len(rp.Queues[qi].Chain)
	}
	return n
}

// laneRuns splits a lane into drawn runs [lo, hi): single entries, and when folding, the runs
// between the kept head, tail and highlighted entries.
func (v *planView) laneRuns(r, qi int, fold bool) [][2]int {
	n := len(v.p.Ranks[r].Queues[qi].Chain)
	runs := make([][2]int, 0, n)
	keep := func(i int) bool {
		return !fold || i < laneHead || i >= n-laneTail || v.hl[WQERef{r, qi, i}]
	}
	for i := 0; i < n; {
		if keep(i) {
			runs = append(runs, [2]int{i, i + 1})
			i++
			continue
		}
		j := i
		for j < n && !keep(j) {
			j++
		}
		if j-i == 1 {
			runs = append(runs, [2]int{i, i + 1})
		} else {
			runs = append(runs, [2]int{i, j})
		}
		i = j
	}
	return runs
}

// postedEntry returns the chain index of the k-th posted WQE (HOST entries are not posted) of a
// work queue, or -1.
func postedEntry(wq *ir.WorkQueue, k int) int {
	for i := range wq.Chain {
		if !wq.Chain[i].Opcode.Posted() {
			continue
		}
		if k == 0 {
			return i
		}
		k--
	}
	return -1
}

// awaited finds the WQE whose completion a condition counts: the producer of that completion
// of the CQ, else through the plan's location of the op it stands for.
func (v *planView) awaited(r int, c ir.Cond) (queue, index int, ok bool) {
	if q, i, ok := v.p.Producer(r, int(c.CQ), c.Count); ok {
		return q, i, true
	}
	return v.locOf(c.Op)
}

// locOf is where op id landed, checked against the plan's bounds.
func (v *planView) locOf(id ir.OpID) (queue, index int, ok bool) {
	_, l, ok := v.p.Place(id)
	return l.Queue, l.Index, ok
}

// Plan-view edge colours.
const (
	colorWait   = "#d9730d"
	colorEnable = "#2a9d3a"
	colorHost   = "#6b6b6b"
)

func (v *planView) draw() *dot.Graph {
	p, g := v.p, v.g
	note := v.opts.Highlight.Note
	d := newRoot(title("plan", g, len(p.Ranks), "target "+p.Target.Name+planNote(note)), "LR")
	d.Attr("ranksep", "0.3")
	dnodes := make([]dot.Node, len(v.nodes))
	made := make([]bool, len(v.nodes))
	rankCl := make([]*dot.Graph, len(p.Ranks))
	laneCl := make([][]*dot.Graph, len(p.Ranks))
	for r := range p.Ranks {
		laneCl[r] = make([]*dot.Graph, len(p.Ranks[r].Queues))
	}
	rankCluster := func(r int) *dot.Graph {
		if rankCl[r] == nil {
			rankCl[r] = cluster(d, fmt.Sprintf("r%06d", r), fmt.Sprintf("rank %d", r), colorRankBG)
		}
		return rankCl[r]
	}

	nodeOf := func(id int32) dot.Node {
		if made[id] {
			return dnodes[id]
		}
		x := &v.nodes[id]
		var n dot.Node
		if x.queue < 0 {
			n = summaryNode(d, fmt.Sprintf("rank%06d", x.rank), v.rankSummary(x.rank))
		} else {
			lane := laneCl[x.rank][x.queue]
			if lane == nil {
				wq := &p.Ranks[x.rank].Queues[x.queue]
				lane = cluster(rankCluster(x.rank), fmt.Sprintf("q%05d", x.queue), v.laneLabel(x.rank, wq), colorLaneBG)
				laneCl[x.rank][x.queue] = lane
			}
			id := fmt.Sprintf("w%06d_%05d_%07d", x.rank, x.queue, x.lo)
			wq := &p.Ranks[x.rank].Queues[x.queue]
			if x.single {
				w := &wq.Chain[x.lo]
				n = node(lane, id, v.wqeLabel(x.rank, x.lo, w))
				styleWQE(n, w)
				if v.hl[WQERef{x.rank, x.queue, x.lo}] {
					highlight(n)
				}
			} else {
				n = summaryNode(lane, id, v.foldLabel(wq.Chain[x.lo:x.hi], x.lo, x.hi))
			}
		}
		dnodes[id], made[id] = n, true
		return n
	}
	for i := range v.nodes {
		if v.opts.drawsRank(v.nodes[i].rank) {
			nodeOf(int32(i))
		}
	}
	// Keep ranks, and lanes within a rank, in plan order from top to bottom.
	var firsts []dot.Node
	var ids []string
	for i := range v.nodes {
		x := &v.nodes[i]
		if made[i] && (x.queue < 0 || x.lo == 0) {
			firsts = append(firsts, dnodes[i])
			ids = append(ids, fmt.Sprintf("anchor%06d_%05d", x.rank, x.queue+1))
		}
	}
	orderClusters(d, firsts, ids)
	type edgeKey struct {
		a, b int32
		kind string
	}
	seen := make(map[edgeKey]bool) // lookup only: edges are drawn in plan order
	merged := newMerger()
	edge := func(r1, q1, i1, r2, q2, i2 int, kind string) {
		a, b := v.rep[r1][q1][i1], v.rep[r2][q2][i2]
		if a < 0 || b < 0 || a == b || seen[edgeKey{a, b, kind}] {
			return
		}
		if !v.opts.drawsRank(r1) && !v.opts.drawsRank(r2) {
			return
		}
		// Transfers between a lane and a folded rank merge into one edge that counts them.
		key, bundle := v.summaryKey(a, b)
		bundle = bundle && kind == "match"
		if bundle && merged.seen(key) {
			return
		}
		seen[edgeKey{a, b, kind}] = true
		e := d.Edge(nodeOf(a), nodeOf(b))
		if bundle {
			merged.add(key, e)
		}
		hl := v.hl[WQERef{r1, q1, i1}] && v.hl[WQERef{r2, q2, i2}]
		switch kind {
		case "chain":
			e.Attr("color", colorOrder)
			e.Attr("arrowsize", "0.5")
			e.Attr("weight", "10")
		case "wait":
			e.Attr("style", "dashed")
			e.Attr("color", colorWait)
			e.Attr("penwidth", "1.3")
		case "enable":
			e.Attr("color", colorEnable)
			e.Attr("penwidth", "1.3")
		case "host":
			e.Attr("style", "dotted")
			e.Attr("color", colorHost)
		case "match":
			e.Attr("style", "dashed")
			e.Attr("color", colorMatch)
			e.Attr("constraint", "false")
			e.Attr("arrowsize", "0.6")
		}
		if hl {
			e.Attr("color", colorHighlight)
			e.Attr("penwidth", "3")
		}
	}
	// Chain order first, so each lane reads left to right.
	for r := range p.Ranks {
		if !v.opts.drawsRank(r) {
			continue
		}
		for qi := range p.Ranks[r].Queues {
			for i := 1; i < len(p.Ranks[r].Queues[qi].Chain); i++ {
				edge(r, qi, i-1, r, qi, i, "chain")
			}
		}
	}
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		for qi := range rp.Queues {
			for i := range rp.Queues[qi].Chain {
				w := &rp.Queues[qi].Chain[i]
				switch w.Opcode {
				case ir.OpcWait:
					if aq, ai, ok := v.awaited(r, w.Wait); ok {
						edge(r, aq, ai, r, qi, i, "wait")
					}
				case ir.OpcSendEnable, ir.OpcRecvEnable:
					if t := int(w.Queue); t >= 0 && t < len(rp.Queues) && w.UpTo > 0 {
						if ti := postedEntry(&rp.Queues[t], int(w.UpTo)-1); ti >= 0 {
							edge(r, qi, i, r, t, ti, "enable")
						}
					}
				case ir.OpcHost:
					for _, c := range w.Waits {
						if aq, ai, ok := v.awaited(r, c); ok {
							edge(r, aq, ai, r, qi, i, "host")
						}
					}
				}
				if w.Opcode.IsData() && w.Op >= 0 && int(w.Op) < len(g.Ops) {
					op := &g.Ops[w.Op]
					if op.Match != ir.None && op.SendsMessage() {
						if mq, mi, ok := v.locOf(op.Match); ok {
							edge(r, qi, i, int(g.Ops[op.Match].Rank), mq, mi, "match")
						}
					}
				}
			}
		}
	}
	v.drawCounters(d, rankCluster, func(r, q, i int) (dot.Node, bool) {
		if r < 0 || r >= len(v.rep) || q < 0 || q >= len(v.rep[r]) || i < 0 || i >= len(v.rep[r][q]) || v.rep[r][q][i] < 0 {
			return dot.Node{}, false
		}
		return nodeOf(v.rep[r][q][i]), true
	})
	merged.label()
	return d
}

// colorCounter draws the counters of a triggered plan and their edges.
const colorCounter = "#7b3294"

// drawCounters draws the counters of the drawn ranks of a triggered plan (ir.Triggered), in a
// lane of their own below the rank's work queues, each with what raises it and what it fires:
//
//   - into a counter, dashed: the completions that its triggered work waits for (the WQE of
//     each cause, for send, recv and host counters), and for a land counter the remote writes
//     that land in its region (ir.Graph.LandWeight), from whichever rank they come;
//   - out of a counter: the work it triggers, labelled with the threshold ("when >= 2"); dotted
//     to a HOST step whose CPU waits for it ("CPU waits >= 1"); counter work as an edge to the
//     counter it changes ("when >= 1: += 1").
//
// Ranks folded into one node keep their counters in it.
func (v *planView) drawCounters(d *dot.Graph, rankCluster func(r int) *dot.Graph, wqe func(r, q, i int) (dot.Node, bool)) {
	p, g := v.p, v.g
	seen := map[[2]string]bool{} // lookup only: edges are drawn in plan order
	edge := func(from, to dot.Node, label string, style string) {
		k := [2]string{from.ID(), to.ID()}
		if seen[k] {
			return
		}
		seen[k] = true
		e := d.Edge(from, to)
		e.Attr("color", colorCounter)
		e.Attr("fontcolor", colorCounter)
		e.Attr("fontname", fontName)
		e.Attr("fontsize", "9")
		if style != "" {
			e.Attr("style", style)
		}
		if label != "" {
			e.Attr("label", label)
		}
	}
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		tr := rp.Trig
		if tr == nil || !v.opts.drawsRank(r) || !v.expanded[r] {
			continue
		}
		used := make([]bool, len(tr.Counters))
		hostWait := make([]int, len(tr.Work)) // the counter the CPU waits for before a HOST step, or -1
		for k := range tr.Work {
			w := &tr.Work[k]
			hostWait[k] = -1
			if w.Counter != ir.Untriggered {
				used[w.Counter] = true
			}
			if w.Kind != ir.TrigOp {
				used[w.Target] = true
			} else if c, _, ok := tr.HostWait(g, w.Op); ok && w.Loc.Queue == rp.Host {
				used[c], hostWait[k] = true, c
			}
		}
		var lane *dot.Graph
		nodes := make([]dot.Node, len(tr.Counters))
		for c := range tr.Counters {
			if !used[c] {
				continue
			}
			if lane == nil {
				lane = cluster(rankCluster(r), "z_counters", "counters", colorLaneBG)
			}
			n := node(lane, fmt.Sprintf("c%06d_%05d", r, c), counterLabel(g, &tr.Counters[c]))
			n.Attr("shape", "ellipse")
			n.Attr("color", colorCounter)
			n.Attr("fillcolor", "#efe3f5")
			nodes[c] = n
		}
		for k := range tr.Work {
			w := &tr.Work[k]
			if w.Counter != ir.Untriggered {
				// What raises the counter: the cause's completion (a land counter's cause is the
				// wait it stands for, which raises nothing).
				if cn := &tr.Counters[w.Counter]; w.Cause != ir.None && (cn.Kind == ir.CntSend || cn.Kind == ir.CntRecv || cn.Kind == ir.CntHost) {
					if cr, l, ok := p.Place(w.Cause); ok {
						if from, ok := wqe(cr, l.Queue, l.Index); ok {
							edge(from, nodes[w.Counter], "", "dashed")
						}
					}
				}
			}
			when := fmt.Sprintf("when >= %d", w.Threshold)
			switch w.Kind {
			case ir.TrigOp:
				to, ok := wqe(r, w.Loc.Queue, w.Loc.Index)
				if !ok {
					continue
				}
				if w.Counter != ir.Untriggered {
					edge(nodes[w.Counter], to, when, "")
				}
				if c := hostWait[k]; c >= 0 {
					_, n, _ := tr.HostWait(g, w.Op)
					edge(nodes[c], to, fmt.Sprintf("CPU waits >= %d", n), "dotted")
				}
			case ir.TrigAdd, ir.TrigSet:
				if w.Counter == ir.Untriggered {
					continue
				}
				change := fmt.Sprintf("+= %d", w.Value)
				if w.Kind == ir.TrigSet {
					change = fmt.Sprintf("= %d", w.Value)
				}
				edge(nodes[w.Counter], nodes[w.Target], when+": "+change, "")
			}
		}
		// The remote writes that land in each land counter's region.
		for c := range tr.Counters {
			cn := &tr.Counters[c]
			if !used[c] || cn.Kind != ir.CntLand {
				continue
			}
			for x := range g.Ops {
				if g.LandWeight(ir.OpID(x), r, cn.Region, false) == 0 {
					continue
				}
				if xr, l, ok := p.Place(ir.OpID(x)); ok {
					if from, ok := wqe(xr, l.Queue, l.Index); ok {
						edge(from, nodes[c], "lands", "dashed")
					}
				}
			}
		}
	}
}

// counterLabel names a counter, what raises it and by how much per iteration.
func counterLabel(g *ir.Graph, c *ir.Counter) string {
	what := c.Kind.String() + ": " + c.Kind.Counts()
	if c.Kind == ir.CntLand {
		what += " into " + g.SliceString(c.Region)
	}
	return fmt.Sprintf("%s\n%s, +%d per iteration", c.Name, what, c.PerIteration)
}

// summaryKey groups a transfer edge between nodes a and b when exactly one end is a folded
// rank: by the other end's lane, the summary and the direction.
func (v *planView) summaryKey(a, b int32) (mergeKey, bool) {
	x, y := &v.nodes[a], &v.nodes[b]
	switch {
	case (x.queue < 0) == (y.queue < 0):
		return mergeKey{}, false
	case y.queue < 0:
		return mergeKey{rank: x.rank, lane: x.queue, summary: b}, true
	default:
		return mergeKey{rank: y.rank, lane: y.queue, summary: a, in: true}, true
	}
}

func planNote(note string) string {
	if note == "" {
		return ""
	}
	return "\n" + note
}

// laneLabel names a lane: work queue, its CQ and whether it is managed.
func (v *planView) laneLabel(r int, wq *ir.WorkQueue) string {
	s := wq.Name
	rp := &v.p.Ranks[r]
	if wq.Kind == ir.SendQueue || wq.Kind == ir.RecvQueue {
		if q := wq.Queue; q >= 0 && int(q) < len(v.g.Queues) {
			s += fmt.Sprintf(" (rank %d)", v.g.Queues[q].PeerRank)
		}
	}
	if wq.CQ >= 0 && wq.CQ < len(rp.CQs) {
		s += "  cq " + rp.CQs[wq.CQ].Name
	}
	if wq.Managed {
		s += "  managed"
	}
	return s
}

// cqName names a rank-local CQ for labels.
func (v *planView) cqName(r, cq int) string {
	if cq >= 0 && cq < len(v.p.Ranks[r].CQs) {
		return v.p.Ranks[r].CQs[cq].Name
	}
	return fmt.Sprintf("cq%d", cq)
}

// wqName names a rank-local work queue for labels.
func (v *planView) wqName(r, q int) string {
	if q >= 0 && q < len(v.p.Ranks[r].Queues) {
		return v.p.Ranks[r].Queues[q].Name
	}
	return fmt.Sprintf("wq%d", q)
}

// opOf is the graph op WQE w belongs to; an empty stand-in when it names none.
func (v *planView) opOf(w *ir.WQE) *ir.Op {
	if w.Op < 0 || int(w.Op) >= len(v.p.Graph.Ops) {
		return &ir.Op{Site: &ir.Site{}}
	}
	return v.p.OpOf(w)
}

// wqeLabel is a WQE node's label: index and opcode, operands, and the op it serves.
func (v *planView) wqeLabel(r, i int, w *ir.WQE) string {
	g := v.g
	head := fmt.Sprintf("[%d] %s", i, w.Opcode)
	if f := w.Flags &^ ir.Signalled; f != 0 {
		head += " " + f.String()
	}
	if w.Signalled() {
		head += " (sig)"
	}
	sl := func(s ir.Seg) string {
		if !s.Valid() || int(s.Buf) >= len(g.Buffers) {
			return "-"
		}
		return g.SliceString(s.Slice())
	}
	var body string
	switch w.Opcode {
	case ir.OpcSend:
		body = fmt.Sprintf("%s -> rank %d", sl(w.Local), w.Peer)
	case ir.OpcRecv:
		body = sl(w.Local)
	case ir.OpcWrite, ir.OpcWriteImm:
		body = fmt.Sprintf("%s -> rank %d %s", sl(w.Local), w.Peer, sl(w.Remote))
	case ir.OpcRead:
		body = fmt.Sprintf("rank %d %s -> %s", w.Peer, sl(w.Remote), sl(w.Local))
	case ir.OpcAtomicFAdd:
		body = fmt.Sprintf("rank %d %s += %d", w.Peer, sl(w.Remote), v.opOf(w).A())
	case ir.OpcAtomicCAS:
		body = fmt.Sprintf("rank %d %s: %d -> %d", w.Peer, sl(w.Remote), v.opOf(w).A(), v.opOf(w).B())
	case ir.OpcWait:
		body = fmt.Sprintf("%s >= %d", v.cqName(r, int(w.Wait.CQ)), w.Wait.Count)
	case ir.OpcSendEnable, ir.OpcRecvEnable:
		body = fmt.Sprintf("%s upto %d", v.wqName(r, int(w.Queue)), w.UpTo)
	case ir.OpcHost:
		if w.Op >= 0 && int(w.Op) < len(g.Ops) {
			body = OpText(g, &g.Ops[w.Op])
		}
	case ir.OpcNop:
		body = "signals host step"
	}
	s := head
	if body != "" {
		s += "\n" + body
	}
	if name := v.opOf(w).Name; name != "" {
		what := name
		switch w.Opcode {
		case ir.OpcWait:
			what = "holds " + name
		case ir.OpcSendEnable, ir.OpcRecvEnable:
			what = "releases up to " + name
		}
		s += "\n" + what
	}
	return s
}

// styleWQE shapes a WQE node by opcode; signalled WQEs get a double border.
func styleWQE(n dot.Node, w *ir.WQE) {
	shape, fill := "box", "white"
	switch w.Opcode {
	case ir.OpcSend, ir.OpcRecv:
		fill = "#d6e6fa"
	case ir.OpcWrite, ir.OpcWriteImm, ir.OpcRead:
		fill = "#d9f0d3"
	case ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
		fill = "#fde0c5"
	case ir.OpcWait:
		shape, fill = "box", "#fff0dc"
		n.Attr("style", "filled,dashed")
	case ir.OpcSendEnable, ir.OpcRecvEnable:
		shape, fill = "box", "#e3f5e1"
		n.Attr("style", "filled,rounded")
	case ir.OpcHost:
		shape, fill = "octagon", "#dcdcdc"
	case ir.OpcNop:
		shape, fill = "box", "#f0f0f0"
	}
	n.Attr("shape", shape)
	n.Attr("fillcolor", fill)
	if w.Signalled() {
		n.Attr("peripheries", "2")
	}
}

// opcodeCounts summarises entries by opcode in enum order: "60 SEND, 60 CQE_WAIT".
func opcodeCounts(chain []ir.WQE) string {
	var counts [ir.OpcHost + 1]int
	for i := range chain {
		if o := chain[i].Opcode; int(o) < len(counts) {
			counts[o]++
		}
	}
	var parts []string
	for o, c := range counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, ir.Opcode(o)))
		}
	}
	return strings.Join(parts, ", ")
}

// foldLabel describes a folded run of a lane.
func (v *planView) foldLabel(chain []ir.WQE, lo, hi int) string {
	s := fmt.Sprintf("[%d..%d] %s folded\n%s", lo, hi-1, english.Plural(hi-lo, "entry"), opcodeCounts(chain))
	if first, last := v.opOf(&chain[0]).Name, v.opOf(&chain[len(chain)-1]).Name; first != "" && last != "" {
		s += fmt.Sprintf("\n%s .. %s", first, last)
	}
	return s
}

// rankSummary describes a folded rank: its lanes with their entry counts.
func (v *planView) rankSummary(r int) string {
	rp := &v.p.Ranks[r]
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d (folded)\n%s", r, english.Plural(rankEntries(rp), "WQE"))
	for qi := range rp.Queues {
		fmt.Fprintf(&b, "\n%s: %d", rp.Queues[qi].Name, len(rp.Queues[qi].Chain))
	}
	return b.String()
}
