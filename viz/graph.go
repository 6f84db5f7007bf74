package viz

import (
	"fmt"
	"strings"

	"github.com/emicklei/dot"

	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// Graph draws the graph view of g: ops as nodes (shape by kind, label with the name, what the op
// does and its file:line), clustered per rank and per queue, host ops in a host cluster of their
// rank. `after` edges are solid, matched transfers (send->recv, notify write->recv) dashed and
// blue across ranks, queue order light grey.
//
// Above the node limit repeated loop bodies (ops whose indexed names form families, like tx[s],
// rx[s], red[s]) keep their first two and last iterations and fold the rest into one summary node;
// if that is not enough, whole ranks fold into one node each. Highlighted ops are never folded.
func Graph(g *ir.Graph, opts Options) *dot.Graph {
	v := &graphView{g: g, opts: opts}
	v.layout()
	return v.draw()
}

// vertex is one node of the drawing: an op, or a summary of several.
type vertex struct {
	op    ir.OpID // the op drawn, or None for a summary
	rank  int
	queue ir.QueueID // cluster the vertex sits in; None: host cluster (ops) or rank level (summaries)
	ops   []ir.OpID  // summaries: the ops folded into it, in declaration order
	loop  bool       // loop-body summary (inside its rank) rather than whole-rank summary
}

type graphView struct {
	g    *ir.Graph
	opts Options
	rep  []int32 // op -> vertex, -1 while undecided or not drawn
	vs   []vertex
	hl   []bool // per op: highlighted
}

// opValid reports whether id indexes g.Ops.
func (v *graphView) opValid(id ir.OpID) bool { return id >= 0 && int(id) < len(v.g.Ops) }

// layout decides which ops get their own vertex and which fold into summaries.
func (v *graphView) layout() {
	g := v.g
	v.rep = make([]int32, len(g.Ops))
	for i := range v.rep {
		v.rep[i] = -1
	}
	v.hl = make([]bool, len(g.Ops))
	for _, id := range v.opts.Highlight.Ops {
		if v.opValid(id) {
			v.hl[id] = true
		}
	}
	var selected []int
	total := 0
	for r := range g.Rank {
		if v.opts.drawsRank(r) {
			selected = append(selected, r)
			total += int(g.Rank[r].EndOp - g.Rank[r].FirstOp)
		}
	}
	limit := v.opts.limit()
	collapse := !v.opts.Full && total > limit
	// loopGroups[r] lists the loop summaries of rank r, each as the ops it folds.
	loopGroups := make([][][]ir.OpID, len(g.Rank))
	if collapse {
		total = 0
		for _, r := range selected {
			loopGroups[r] = v.loopBodies(r)
			total += v.rankVertices(r, loopGroups[r])
		}
	}
	// Keep the first selected rank in full; add the next ones while they fit (every rank after
	// them still costs its summary node) and fold the rest.
	expanded := make([]bool, len(g.Rank))
	for _, r := range selected {
		expanded[r] = true
	}
	if collapse && total > limit && len(selected) > 1 {
		used := v.rankVertices(selected[0], loopGroups[selected[0]])
		folding := false
		for i, r := range selected[1:] {
			after := len(selected) - 2 - i
			need := v.rankVertices(r, loopGroups[r])
			if folding || used+need+after > limit {
				folding = true
				expanded[r] = false
				used++
				continue
			}
			used += need
		}
	}
	// Assign vertices rank by rank, in declaration order.
	for r := range g.Rank {
		first, end := g.RankOps(r)
		if !expanded[r] {
			continue
		}
		folded := make(map[ir.OpID]int, 0) // op -> loop group index
		for gi, grp := range loopGroups[r] {
			for _, id := range grp {
				folded[id] = gi
			}
		}
		groupVertex := make([]int32, len(loopGroups[r]))
		for i := range groupVertex {
			groupVertex[i] = -1
		}
		for id := first; id < end; id++ {
			if gi, ok := folded[id]; ok {
				if groupVertex[gi] < 0 {
					groupVertex[gi] = int32(len(v.vs))
					v.vs = append(v.vs, vertex{op: ir.None, rank: r, queue: commonQueue(g, loopGroups[r][gi]), ops: loopGroups[r][gi], loop: true})
				}
				v.rep[id] = groupVertex[gi]
				continue
			}
			v.rep[id] = int32(len(v.vs))
			v.vs = append(v.vs, vertex{op: id, rank: r, queue: g.Ops[id].Queue})
		}
	}
	// Folded and unselected ranks become one summary vertex each. Unselected ranks are drawn only
	// when a matched transfer connects them to a drawn op (see draw).
	for r := range g.Rank {
		if expanded[r] {
			continue
		}
		first, end := g.RankOps(r)
		ops := make([]ir.OpID, 0, end-first)
		for id := first; id < end; id++ {
			ops = append(ops, id)
		}
		vi := int32(len(v.vs))
		v.vs = append(v.vs, vertex{op: ir.None, rank: r, queue: ir.None, ops: ops})
		for id := first; id < end; id++ {
			v.rep[id] = vi
		}
	}
}

// rankVertices is the number of vertices rank r needs with the given loop groups folded.
func (v *graphView) rankVertices(r int, groups [][]ir.OpID) int {
	n := int(v.g.Rank[r].EndOp - v.g.Rank[r].FirstOp)
	for _, grp := range groups {
		n -= len(grp) - 1
	}
	return n
}

// Loop folding keeps the first loopHead and last loopTail members of an indexed family.
const (
	loopHead = 2
	loopTail = 1
)

// loopBodies finds the repeated loop bodies of rank r: families of ops sharing a base name
// (tx[0], tx[1], ...) whose middle members fold together. Families whose middle members have the
// same indices and interleave in declaration order (one loop's body) fold into one group.
func (v *graphView) loopBodies(r int) [][]ir.OpID {
	g := v.g
	first, end := g.RankOps(r)
	type family struct {
		base    string
		members []ir.OpID
		hl      bool
	}
	var fams []*family
	byBase := map[string]*family{} // lookup only; fams keeps the order
	for id := first; id < end; id++ {
		base, idx := familyOf(g.Ops[id].Name)
		if idx == "" {
			continue
		}
		f := byBase[base]
		if f == nil {
			f = &family{base: base}
			byBase[base] = f
			fams = append(fams, f)
		}
		f.members = append(f.members, id)
		f.hl = f.hl || v.hl[id]
	}
	type group struct {
		key      string
		lo, hi   ir.OpID
		ops      []ir.OpID
		families int
	}
	var groups []*group
	for _, f := range fams {
		if f.hl || len(f.members) < loopHead+loopTail+2 {
			continue
		}
		mid := f.members[loopHead : len(f.members)-loopTail]
		var kb strings.Builder
		for _, id := range mid {
			_, idx := familyOf(g.Ops[id].Name)
			kb.WriteString(idx)
		}
		key := kb.String()
		lo, hi := mid[0], mid[len(mid)-1]
		var into *group
		for _, gr := range groups {
			if gr.key == key && lo <= gr.hi && gr.lo <= hi {
				into = gr
				break
			}
		}
		if into == nil {
			into = &group{key: key, lo: lo, hi: hi}
			groups = append(groups, into)
		}
		into.ops = append(into.ops, mid...)
		into.families++
		into.lo, into.hi = min(into.lo, lo), max(into.hi, hi)
	}
	out := make([][]ir.OpID, 0, len(groups))
	for _, gr := range groups {
		sortOps(gr.ops)
		out = append(out, gr.ops)
	}
	return out
}

// sortOps sorts op ids ascending (insertion sort: groups are a few interleaved sorted runs).
func sortOps(ids []ir.OpID) {
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

// commonQueue is the queue all ops sit on, or None if they are on several (or on the host).
func commonQueue(g *ir.Graph, ops []ir.OpID) ir.QueueID {
	q := g.Ops[ops[0]].Queue
	for _, id := range ops[1:] {
		if g.Ops[id].Queue != q {
			return ir.None
		}
	}
	return q
}

// edge kinds of the graph view, in drawing order.
const (
	edgeAfter = iota
	edgeOrder
	edgeMatch
)

func (v *graphView) draw() *dot.Graph {
	g := v.g
	d := newRoot(title("graph", g, g.Ranks, v.opts.Highlight.Note), "TB")
	nodes := make([]dot.Node, len(v.vs))
	made := make([]bool, len(v.vs))
	rankCl := make([]*dot.Graph, len(g.Rank))
	queueCl := make([]*dot.Graph, len(g.Queues))
	hostCl := make([]*dot.Graph, len(g.Rank))

	rankCluster := func(r int) *dot.Graph {
		if rankCl[r] == nil {
			rankCl[r] = cluster(d, fmt.Sprintf("r%06d", r), fmt.Sprintf("rank %d", r), colorRankBG)
		}
		return rankCl[r]
	}
	parentOf := func(x *vertex) *dot.Graph {
		switch {
		case x.op == ir.None && !x.loop:
			return d
		case x.queue != ir.None && int(x.queue) < len(g.Queues):
			if queueCl[x.queue] == nil {
				q := &g.Queues[x.queue]
				queueCl[x.queue] = cluster(rankCluster(x.rank), fmt.Sprintf("q%07d", x.queue), queueLabel(q), colorLaneBG)
			}
			return queueCl[x.queue]
		case x.op == ir.None:
			return rankCluster(x.rank)
		default:
			if hostCl[x.rank] == nil {
				hostCl[x.rank] = cluster(rankCluster(x.rank), "x_host", "host", colorLaneBG)
			}
			return hostCl[x.rank]
		}
	}
	vertexNode := func(i int32) dot.Node {
		if made[i] {
			return nodes[i]
		}
		x := &v.vs[i]
		var n dot.Node
		switch {
		case x.op != ir.None:
			op := &g.Ops[x.op]
			n = node(parentOf(x), fmt.Sprintf("op%07d", x.op), opLabel(g, op))
			styleOp(n, op.Kind)
			if v.hl[x.op] {
				highlight(n)
			}
		case x.loop:
			n = summaryNode(parentOf(x), fmt.Sprintf("z%07d", x.ops[0]), loopLabel(g, x.ops))
		default:
			n = summaryNode(d, fmt.Sprintf("rank%06d", x.rank), rankLabel(g, x.rank, x.ops))
		}
		nodes[i], made[i] = n, true
		return n
	}
	// Every vertex of a drawn rank exists even without edges; summaries of ranks that are
	// not selected appear only when a matched transfer reaches them.
	for i := range v.vs {
		if x := &v.vs[i]; x.op != ir.None || x.loop || v.opts.drawsRank(x.rank) {
			vertexNode(int32(i))
		}
	}

	type edgeKey struct {
		a, b int32
		kind int
	}
	seen := make(map[edgeKey]bool) // lookup only: edges are drawn in plan order
	merged := newMerger()
	addEdge := func(from, to ir.OpID, kind int) {
		if !v.opValid(from) || !v.opValid(to) {
			return
		}
		a, b := v.rep[from], v.rep[to]
		if a < 0 || b < 0 || a == b {
			return
		}
		if kind == edgeMatch && !v.opts.drawsRank(v.vs[a].rank) && !v.opts.drawsRank(v.vs[b].rank) {
			return
		}
		// Queue order already implied by an `after` edge between the same nodes is not drawn twice.
		if seen[edgeKey{a, b, kind}] || kind == edgeOrder && seen[edgeKey{a, b, edgeAfter}] {
			return
		}
		// Transfers between a queue and a folded rank merge into one edge that counts them.
		if kind == edgeMatch {
			if key, ok := v.summaryKey(a, b); ok && merged.seen(key) {
				return
			}
		}
		seen[edgeKey{a, b, kind}] = true
		e := d.Edge(vertexNode(a), vertexNode(b))
		if kind == edgeMatch {
			if key, ok := v.summaryKey(a, b); ok {
				merged.add(key, e)
			}
		}
		switch kind {
		case edgeAfter:
			e.Attr("color", "black")
		case edgeOrder:
			e.Attr("color", colorOrder)
			e.Attr("arrowsize", "0.5")
			e.Attr("weight", "2")
		case edgeMatch:
			e.Attr("style", "dashed")
			e.Attr("color", colorMatch)
			e.Attr("constraint", "false")
		}
		if v.hl[from] && v.hl[to] {
			e.Attr("color", colorHighlight)
			e.Attr("penwidth", "2.5")
		}
	}
	for _, e := range g.Edges {
		addEdge(e.From, e.To, edgeAfter)
	}
	for qi := range g.Queues {
		q := &g.Queues[qi]
		for _, side := range [2][]ir.OpID{q.SendOps, q.RecvOps} {
			for i := 1; i < len(side); i++ {
				addEdge(side[i-1], side[i], edgeOrder)
			}
		}
	}
	// Keep rank clusters in rank order, each anchored at its first op.
	var firsts []dot.Node
	var ids []string
	lastRank := -1
	for i := range v.vs {
		if x := &v.vs[i]; made[i] && x.rank != lastRank && (x.op != ir.None || x.loop) {
			lastRank = x.rank
			firsts = append(firsts, nodes[i])
			ids = append(ids, fmt.Sprintf("anchor%06d", x.rank))
		}
	}
	orderClusters(d, firsts, ids)
	for id := range g.Ops {
		op := &g.Ops[id]
		if op.Match == ir.None || !op.SendsMessage() {
			continue
		}
		addEdge(ir.OpID(id), op.Match, edgeMatch)
	}
	merged.label()
	return d
}

// summaryKey groups a transfer edge between vertices a and b when exactly one end is a folded
// rank: by the other end's rank and queue cluster, the summary and the direction.
func (v *graphView) summaryKey(a, b int32) (mergeKey, bool) {
	folded := func(i int32) bool { x := &v.vs[i]; return x.op == ir.None && !x.loop }
	switch {
	case folded(a) == folded(b):
		return mergeKey{}, false
	case folded(b):
		return mergeKey{rank: v.vs[a].rank, lane: int(v.vs[a].queue), summary: b}, true
	default:
		return mergeKey{rank: v.vs[b].rank, lane: int(v.vs[b].queue), summary: a, in: true}, true
	}
}

// queueLabel names a queue's cluster: "right -> rank 1 (left)".
func queueLabel(q *ir.Queue) string {
	if q.Loopback() {
		return fmt.Sprintf("queue %s (loopback)", q.Name)
	}
	return fmt.Sprintf("queue %s -> rank %d", q.Name, q.PeerRank)
}

// opLabel is an op node's label: name, what it does, file:line.
func opLabel(g *ir.Graph, op *ir.Op) string {
	s := op.Name + "\n" + OpText(g, op)
	if p := posString(op.Pos.Filename(), int(op.Pos.Line)); p != "" {
		s += "\n" + p
	}
	return s
}

// OpText renders what an op does the way the language writes it, without its name:
// "send right data[0:1024]", "reduce sum data[0:4] from tmp".
func OpText(g *ir.Graph, op *ir.Op) string {
	q := "?"
	if op.Queue >= 0 && int(op.Queue) < len(g.Queues) {
		q = g.Queues[op.Queue].Name
	}
	sl := func(s ir.Slice) string {
		if !s.Valid() || int(s.Buf) >= len(g.Buffers) {
			return ""
		}
		return " " + g.SliceString(s)
	}
	// list is the op's scatter/gather list side: its first slice, then More.
	list := func(first ir.Slice) string {
		s := sl(first)
		for _, m := range op.More() {
			s += "," + sl(m)
		}
		return s
	}
	switch op.Kind {
	case ir.OpSend:
		s := "send " + q + list(op.Src)
		if op.Inline {
			s += " inline"
		}
		return s
	case ir.OpRecv:
		return "recv " + q + list(op.Dst)
	case ir.OpWrite:
		s := "write " + q + list(op.Src) + " to" + sl(op.Dst)
		if op.Notify {
			s += " notify"
		}
		return s
	case ir.OpRead:
		return "read " + q + sl(op.Src) + " to" + list(op.Dst)
	case ir.OpAtomicAdd:
		s := fmt.Sprintf("atomic add %s%s %d", q, sl(op.Dst), op.A())
		if op.Fetch().Valid() {
			s += " to" + sl(op.Fetch())
		}
		return s
	case ir.OpAtomicCAS:
		s := fmt.Sprintf("atomic cas %s%s %d %d", q, sl(op.Dst), op.A(), op.B())
		if op.Fetch().Valid() {
			s += " to" + sl(op.Fetch())
		}
		return s
	case ir.OpReduce:
		return "reduce " + op.Red.String() + sl(op.Dst) + " from" + sl(op.Src)
	case ir.OpCopy:
		return "copy" + sl(op.Src) + " to" + sl(op.Dst)
	case ir.OpNop:
		return "nop"
	case ir.OpWait:
		if op.WaitsWord() {
			return fmt.Sprintf("wait%s >= %d", sl(op.Dst), op.A())
		}
		return fmt.Sprintf("wait %d writes to%s", op.A(), sl(op.Dst))
	}
	return op.Kind.String()
}

// styleOp gives an op node its shape and colour by kind: two-sided transfers blue, one-sided
// green, atomics orange, host ops grey.
func styleOp(n dot.Node, k ir.OpKind) {
	shape, fill := "box", "#ececec"
	switch k {
	case ir.OpSend:
		shape, fill = "cds", "#d6e6fa"
	case ir.OpRecv:
		shape, fill = "invhouse", "#d6e6fa"
	case ir.OpWrite:
		shape, fill = "box", "#d9f0d3"
	case ir.OpRead:
		shape, fill = "parallelogram", "#d9f0d3"
	case ir.OpAtomicAdd, ir.OpAtomicCAS:
		shape, fill = "hexagon", "#fde0c5"
	case ir.OpReduce:
		shape = "octagon"
	case ir.OpCopy:
		shape = "component"
	case ir.OpNop:
		shape = "ellipse"
	}
	n.Attr("shape", shape)
	n.Attr("fillcolor", fill)
}

// kindCounts summarises ops by kind in enum order: "60 send, 60 recv, 60 reduce".
func kindCounts(g *ir.Graph, ops []ir.OpID) string {
	var counts [ir.OpWait + 1]int
	for _, id := range ops {
		if k := g.Ops[id].Kind; int(k) < len(counts) {
			counts[k]++
		}
	}
	var parts []string
	for k, c := range counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, ir.OpKind(k)))
		}
	}
	return strings.Join(parts, ", ")
}

// loopLabel describes a folded loop body: which families, which indices, how many ops.
func loopLabel(g *ir.Graph, ops []ir.OpID) string {
	var bases []string
	for _, id := range ops {
		b, _ := familyOf(g.Ops[id].Name)
		dup := false
		for _, x := range bases {
			dup = dup || x == b
		}
		if !dup {
			bases = append(bases, b)
		}
	}
	_, lo := familyOf(g.Ops[ops[0]].Name)
	_, hi := familyOf(g.Ops[ops[len(ops)-1]].Name)
	iters := len(ops) / len(bases)
	return fmt.Sprintf("loop body x %d folded\n%s  %s .. %s\n%s: %s",
		iters, strings.Join(bases, ", "), lo, hi, english.Plural(len(ops), "op"), kindCounts(g, ops))
}

// rankLabel describes a folded rank: op counts by kind and its queues.
func rankLabel(g *ir.Graph, r int, ops []ir.OpID) string {
	var qs []string
	span := g.Rank[r]
	for q := span.FirstQueue; q < span.EndQueue; q++ {
		qs = append(qs, g.Queues[q].Name)
	}
	s := fmt.Sprintf("rank %d (folded)\n%s", r, english.Plural(len(ops), "op"))
	if len(ops) > 0 {
		s += ": " + kindCounts(g, ops)
	}
	if len(qs) > 0 {
		s += "\nqueues: " + strings.Join(qs, ", ")
	}
	return s
}
