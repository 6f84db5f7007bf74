package msccl

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// ExportOptions say what the exported algorithm claims to be.
type ExportOptions struct {
	Coll  string // the coll attribute; "" takes it from the plan's postcondition, or "custom"
	Proto string // "" is "Simple"
}

// estep is one step of an exported threadblock: its ops (a recv fused with the copy or reduce
// that consumes its slot counts as one step) and where it lands.
type estep struct {
	typ      string
	ops      []ir.OpID
	tb       *etb
	at       int // index in its threadblock before nops are added
	idx      int // index in its threadblock, nops included
	src, dst ir.Slice
	deps     []*estep
	hasdep   bool
}

type etb struct {
	send, recv, ch int
	steps          []*estep
	id             int
}

// Export writes a checked plan as MSCCL-IR XML (the old format, every attribute present). It
// takes the two-sided subset: send, recv, reduce (sum), copy and nop; anything else is refused
// with a diagnostic at the op. See docs/msccl.md for how ops become threadblocks and steps.
func Export(g *ir.Graph, opt ExportOptions) ([]byte, error) {
	e := &exporter{g: g, root: -1}
	e.exp = collExpect(g, opt.Coll)
	if opt.Coll == "" {
		opt.Coll = "custom"
		if e.exp != nil {
			opt.Coll = e.exp.Kind.String()
		}
	}
	if opt.Proto == "" {
		opt.Proto = "Simple"
	}
	e.coll = opt.Coll
	for _, o := range []struct{ name, v string }{{"coll", opt.Coll}, {"proto", opt.Proto}} {
		if bad := notXML(o.v); bad != "" {
			e.errs.Add(diag.Shape, diag.InFile(g.File), "%s %q holds %s", o.name, o.v, bad)
		}
	}
	e.refuse()
	if len(e.errs) > 0 {
		e.errs.Sort()
		return nil, e.errs
	}
	fused := e.fuse()
	e.layout(fused)
	if len(e.errs) > 0 {
		e.errs.Sort()
		return nil, e.errs
	}
	e.steps(fused)
	if len(e.errs) > 0 {
		e.errs.Sort()
		return nil, e.errs
	}
	return e.write(opt), nil
}

type exporter struct {
	g       *ir.Graph
	exp     *ir.Expect // the postcondition that lays the buffers out; nil for the names
	coll    string
	root    int   // the root attribute; -1 for none
	blkOf   byte  // the MSCCL buffer that is one block of the other (reduce_scatter's o, in-place allgather's i); 0: none
	blk     int64 // its size in elements
	shift   bool  // o is block `rank` of the plan's output (an out-of-place reduce_scatter)
	errs    diag.List
	mbuf    []byte  // MSCCL buffer of each plan buffer: 'i', 'o', 's' (0: unused)
	base    []int64 // element where each plan buffer starts in its MSCCL buffer
	size    map[byte]int64
	chunk   int64
	inplace bool
	slots   ir.BufID
	chans   []int // channel of each queue
	stepOf  []*estep
	tbs     [][]*etb // per rank, sorted by (send, recv, chan)
}

func (e *exporter) refuse() {
	g := e.g
	var elem *ir.Buffer
	used := make([]bool, len(g.Buffers))
	var grp diag.Group // one diagnostic per mistake, with the ranks that make it
	refuse := func(code diag.Code, op *ir.Op, format string, args ...any) {
		grp.Add(diag.Errorf(code, op.Pos, format, args...), format, int(op.Rank))
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		switch op.Kind {
		case ir.OpSend, ir.OpRecv:
			s := op.Src
			if op.Kind == ir.OpRecv {
				s = op.Dst
			}
			if !s.Valid() || g.SegsBytes(op.SrcSegs())+g.SegsBytes(op.DstSegs()) == 0 {
				refuse(diag.Shape, op, "%s is a %s of zero bytes (a signal), which MSCCL-IR cannot express: every MSCCL step moves at least one chunk", op.Name, op.Kind)
			}
			if len(op.More()) > 0 {
				refuse(diag.Shape, op, "%s is a %s of a scatter/gather list of %d slices, which MSCCL-IR cannot express: a step moves one run of chunks (split the op)", op.Name, op.Kind, 1+len(op.More()))
			}
			if q := &g.Queues[op.Queue]; q.Loopback() {
				refuse(diag.Match, op, "%s is on loopback queue %s: MSCCL threadblocks send to and receive from other GPUs only", op.Name, q.Name)
			}
		case ir.OpReduce:
			if op.Red != ir.RedSum {
				refuse(diag.Shape, op, "%s is a reduce %s: MSCCL steps reduce with the operator the collective is called with, and export writes sum reductions only", op.Name, op.Red)
			}
		case ir.OpCopy, ir.OpNop:
			if op.Kind == ir.OpCopy && op.Src.Len == 0 {
				refuse(diag.Shape, op, "%s copies an empty slice, which MSCCL-IR cannot express: every MSCCL step moves at least one chunk", op.Name)
			}
		default:
			what := "a " + op.Kind.String()
			switch {
			case op.Kind == ir.OpWrite && op.Notify:
				what = "a write with notify"
			case strings.IndexByte("aeiou", what[2]) >= 0:
				what = "an" + what[1:]
			}
			refuse(diag.Shape, op, "%s is %s, which MSCCL-IR cannot express: export takes the two-sided subset (send, recv, reduce, copy, nop)", op.Name, what)
		}
		for _, s := range []ir.Slice{op.Src, op.Dst} {
			if !s.Valid() {
				continue
			}
			used[s.Buf] = true
			b := &g.Buffers[s.Buf]
			if elem == nil {
				elem = b
			} else if b.Type != elem.Type {
				e.errs.Add(diag.Shape, b.Pos, "buffer %s holds %s but buffer %s holds %s: an MSCCL algorithm has one element type", b.Name, b.Type, elem.Name, elem.Type).Relate(elem.Pos, "buffer "+elem.Name)
			}
		}
	}
	e.errs = append(e.errs, grp.List(g.Ranks)...)
	if len(g.Ops) == 0 {
		e.errs.Add(diag.Shape, diag.InFile(g.File), "the plan has no ops")
	}
	e.mbuf = make([]byte, len(g.Buffers))
	for i, b := range g.Buffers {
		if used[i] {
			e.mbuf[i] = 's'
			switch b.Name {
			case BufInput:
				e.mbuf[i] = 'i'
			case BufOutput:
				e.mbuf[i] = 'o'
			case BufInplace:
				e.mbuf[i], e.inplace = 'i', true
			}
		}
	}
	if x := e.exp; x != nil {
		// The postcondition's buffers are the algorithm's input and output (or its one
		// in-place buffer); the others are scratch.
		for i := range e.mbuf {
			if e.mbuf[i] != 0 {
				e.mbuf[i] = 's'
			}
		}
		e.inplace = x.Src == x.Dst
		if used[x.Src] {
			e.mbuf[x.Src] = 'i'
		}
		if used[x.Dst] {
			e.mbuf[x.Dst] = 'o'
			if e.inplace {
				e.mbuf[x.Dst] = 'i'
			}
		}
		if x.Kind.Rooted() {
			e.root = x.Root
		}
	}
	if e.inplace && e.coll == "allgather" {
		// In place, an allgather's input is the rank's block of its output: the buffer is o.
		for i := range e.mbuf {
			if e.mbuf[i] == 'i' {
				e.mbuf[i] = 'o'
			}
		}
	}
	if !slices.Contains(e.mbuf, 'i') && !(e.inplace && e.coll == "allgather") {
		// The first buffer the plan uses is the input.
		for i := range e.mbuf {
			if e.mbuf[i] == 's' && g.Buffers[i].Name != BufSlots {
				e.mbuf[i] = 'i'
				break
			}
		}
	}
	e.slots = ir.None
	for i, b := range g.Buffers {
		if b.Name == BufSlots && used[i] {
			e.slots = ir.BufID(i)
		}
	}
}

// layout works out the chunk (the largest size that divides every slice and buffer), where
// each plan buffer goes, and the channel of every queue.
func (e *exporter) layout(fused map[ir.OpID]*estep) {
	g := e.g
	if e.slots != ir.None {
		// The slots buffer stays only if an op uses it outside a fused step.
		in := map[ir.OpID]bool{}
		for _, s := range fused {
			for _, op := range s.ops {
				in[op] = true
			}
		}
		e.mbuf[e.slots] = 0
		for i := range g.Ops {
			if o := &g.Ops[i]; (o.Src.Buf == e.slots || o.Dst.Buf == e.slots) && !in[ir.OpID(i)] {
				e.mbuf[e.slots] = 's'
			}
		}
	}
	var c int64
	for i := range g.Ops {
		for _, s := range []ir.Slice{g.Ops[i].Src, g.Ops[i].Dst} {
			if s.Valid() && e.mbuf[s.Buf] != 0 {
				c = gcd(gcd(c, s.Off), s.Len)
			}
		}
	}
	for i, b := range g.Buffers {
		if e.mbuf[i] != 0 {
			c = gcd(c, b.Count)
		}
	}
	e.chunk = max(c, 1)
	e.base = make([]int64, len(g.Buffers))
	e.size = map[byte]int64{}
	// Scratch first, then the other buffers, then the slots.
	for _, pass := range []func(b *ir.Buffer) bool{
		func(b *ir.Buffer) bool { return b.Name == BufScratch },
		func(b *ir.Buffer) bool { return b.Name != BufScratch && b.Name != BufSlots },
		func(b *ir.Buffer) bool { return b.Name == BufSlots },
	} {
		for i := range g.Buffers {
			b := &g.Buffers[i]
			if m := e.mbuf[i]; m != 0 && pass(b) {
				e.base[i] = e.size[m]
				e.size[m] += b.Count
			}
		}
	}
	e.blocks()
	for m, n := range e.size {
		if n/e.chunk > MaxChunks {
			e.errs.Add(diag.Limit, diag.InFile(g.File), "the %s buffer would hold %s of %s: more than MSCCL-IR's offsets reach", bufWords[m], english.Plural(int(n/e.chunk), "chunk"), english.Plural(int(e.chunk), "element"))
		}
	}
	// Channels: the k-th queue between two ranks, counted on the lower rank, is channel k.
	e.chans = make([]int, len(g.Queues))
	for r := 0; r < g.Ranks; r++ {
		n := map[int]int{}
		for q := g.Rank[r].FirstQueue; q < g.Rank[r].EndQueue; q++ {
			if qq := &g.Queues[q]; qq.PeerRank > r {
				e.chans[q] = n[qq.PeerRank]
				n[qq.PeerRank]++
				if qq.Peer != ir.None {
					e.chans[qq.Peer] = e.chans[q]
				}
			}
		}
	}
}

// blocks lays out the collectives whose input and output differ in size: an allgather's input
// and a reduce_scatter's output are one block (of ranks) of the other buffer, in place its
// rank's block (aliasOffset); out of place a reduce_scatter's output is block `rank` of the
// plan's input-sized output, which each rank may use only that block of.
func (e *exporter) blocks() {
	g := e.g
	full := byte('i')
	switch {
	case e.coll == "allgather" && e.inplace:
		e.blkOf, full = 'i', 'o'
	case e.coll == "reduce_scatter" && (e.inplace || slices.Contains(e.mbuf, 'o')):
		e.blkOf, full, e.shift = 'o', 'o', !e.inplace
		if e.inplace {
			full = 'i'
		}
	default:
		return
	}
	n := e.size[full]
	if n%int64(g.Ranks) != 0 {
		for i, m := range e.mbuf {
			if m == full {
				e.errs.Add(diag.Shape, g.Buffers[i].Pos, "buffer %s has %s, which do not divide into %d blocks (one per rank): a %s's %s is one block of it", g.Buffers[i].Name, english.Plural(int(n), "element"), g.Ranks, e.coll, bufWords[e.blkOf])
			}
		}
		return
	}
	e.blk = n / int64(g.Ranks)
	if e.blk > 0 {
		e.chunk = gcd(e.chunk, e.blk)
	}
	if !e.shift {
		return
	}
	var grp diag.Group // one diagnostic per op, with the ranks that make it
	for i := range g.Ops {
		op := &g.Ops[i]
		for _, s := range []ir.Slice{op.Src, op.Dst} {
			lo := int64(op.Rank) * e.blk
			if s.Valid() && e.mbuf[s.Buf] == 'o' && (s.Off < lo || s.Off+s.Len > lo+e.blk) {
				const format = "%s uses %s, outside the rank's block of %s: out of place, a reduce_scatter's output on rank r is block r of the output, %s from element r * %d"
				grp.Add(diag.Errorf(diag.Shape, op.Pos, format, op.Name, g.SliceString(s), g.Buffers[s.Buf].Name, english.Plural(int(e.blk), "element"), e.blk), format, int(op.Rank))
			}
		}
	}
	e.errs = append(e.errs, grp.List(g.Ranks)...)
}

// steps groups ops into steps and threadblocks.
func (e *exporter) steps(fused map[ir.OpID]*estep) {
	g := e.g
	e.stepOf = make([]*estep, len(g.Ops))
	order := e.topoOrder()
	e.tbs = make([][]*etb, g.Ranks)
	for r := 0; r < g.Ranks; r++ {
		tbs := map[[3]int]*etb{}
		get := func(send, recv, ch int) *etb {
			k := [3]int{send, recv, ch}
			if tbs[k] == nil {
				tbs[k] = &etb{send: send, recv: recv, ch: ch}
			}
			return tbs[k]
		}
		add := func(t *etb, s *estep) {
			s.tb, s.at = t, len(t.steps)
			t.steps = append(t.steps, s)
			for _, op := range s.ops {
				e.stepOf[op] = s
			}
		}
		for q := g.Rank[r].FirstQueue; q < g.Rank[r].EndQueue; q++ {
			qq := &g.Queues[q]
			for _, op := range qq.SendOps {
				add(get(qq.PeerRank, -1, e.chans[q]), &estep{typ: "s", ops: []ir.OpID{op}, src: g.Ops[op].Src})
			}
			for _, op := range qq.RecvOps {
				s := fused[op]
				if s == nil {
					s = &estep{typ: "r", ops: []ir.OpID{op}, dst: g.Ops[op].Dst}
				}
				add(get(-1, qq.PeerRank, e.chans[q]), s)
			}
		}
		for _, op := range order {
			o := &g.Ops[op]
			if int(o.Rank) != r || o.Kind.OnQueue() || o.Kind == ir.OpNop || e.stepOf[op] != nil {
				continue // a nop is no step: its dependencies pass through it (stepPreds)
			}
			s := &estep{typ: "nop", ops: []ir.OpID{op}}
			switch o.Kind {
			case ir.OpCopy:
				s.typ, s.src, s.dst = "cpy", o.Src, o.Dst
			case ir.OpReduce:
				s.typ, s.src, s.dst = "re", o.Src, o.Dst
			}
			add(get(-1, -1, 0), s)
		}
		list := make([]*etb, 0, len(tbs))
		for _, t := range tbs {
			list = append(list, t)
		}
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			return cmpInts(a.send, b.send, a.recv, b.recv, a.ch, b.ch) < 0
		})
		for i, t := range list {
			t.id = i
		}
		e.tbs[r] = list
	}
	for r := range e.tbs {
		e.deps(e.tbs[r])
	}
	// Step indices with the nops that carry extra dependencies.
	for r := range e.tbs {
		for _, t := range e.tbs[r] {
			i := 0
			for _, s := range t.steps {
				i += max(len(s.deps)-1, 0)
				s.idx = i
				i++
			}
		}
	}
}

// deps works out the dependencies of the steps of one rank's threadblocks: for each step, the
// steps of other threadblocks its ops wait for, less those it waits for anyway (through the
// steps before it in its threadblock or through another of its dependencies), found with a
// vector clock per step over the threadblocks. Steps that cannot be ordered (an op that waits
// for one placed after it in its threadblock) are refused: MSCCL would deadlock on them.
func (e *exporter) deps(tbs []*etb) {
	g := e.g
	nopPreds := map[ir.OpID][]*estep{}
	var all []*estep
	raw := map[*estep][]*estep{}
	succ := map[*estep][]*estep{}
	indeg := map[*estep]int{}
	for _, t := range tbs {
		for i, s := range t.steps {
			all = append(all, s)
			if i > 0 {
				succ[t.steps[i-1]] = append(succ[t.steps[i-1]], s)
				indeg[s]++
			}
			latest := map[*etb]*estep{}
			for _, op := range s.ops {
				for _, d := range e.stepPreds(op, nopPreds) {
					if d == s || d.tb == t && d.at < s.at {
						continue
					}
					if l := latest[d.tb]; l == nil || d.at > l.at {
						latest[d.tb] = d
					}
				}
			}
			for _, d := range latest {
				raw[s] = append(raw[s], d)
				succ[d] = append(succ[d], s)
				indeg[s]++
			}
			slices.SortFunc(raw[s], func(a, b *estep) int { return cmpInts(a.tb.id, b.tb.id, a.at, b.at) })
		}
	}
	var order, ready []*estep
	for _, s := range all {
		if indeg[s] == 0 {
			ready = append(ready, s)
		}
	}
	order = topoOrder(order, ready, func(s *estep) []*estep { return succ[s] }, func(x *estep) bool { indeg[x]--; return indeg[x] == 0 })
	if len(order) < len(all) {
		for _, s := range all {
			if indeg[s] > 0 {
				op := &g.Ops[s.ops[0]]
				e.errs.Add(diag.Deadlock, op.Pos, "%s cannot be placed in an MSCCL threadblock: threadblocks run their steps in queue order, and with this op's dependencies that order would deadlock (on rank %d)", op.Name, op.Rank)
				return
			}
		}
	}
	clock := map[*estep][]int{}
	for _, s := range order {
		c := make([]int, len(tbs))
		for i := range c {
			c[i] = -1
		}
		merge := func(d *estep) {
			for i, v := range clock[d] {
				c[i] = max(c[i], v)
			}
			c[d.tb.id] = max(c[d.tb.id], d.at)
		}
		if s.at > 0 {
			merge(s.tb.steps[s.at-1])
		}
		base := slices.Clone(c)
		for _, d := range raw[s] {
			merge(d)
		}
		clock[s] = c
		for _, d := range raw[s] {
			implied := base[d.tb.id] >= d.at
			for _, o := range raw[s] {
				if o != d && clock[o][d.tb.id] >= d.at {
					implied = true
				}
			}
			if !implied {
				s.deps = append(s.deps, d)
			}
		}
	}
}

// stepPreds are the steps that op waits for, through nops (memo holds each nop's).
func (e *exporter) stepPreds(op ir.OpID, memo map[ir.OpID][]*estep) []*estep {
	var out []*estep
	for _, p := range e.g.Preds(op) {
		switch {
		case e.stepOf[p] != nil:
			out = append(out, e.stepOf[p])
		case e.g.Ops[p].Kind == ir.OpNop:
			m, ok := memo[ir.OpID(p)]
			if !ok {
				m = e.stepPreds(ir.OpID(p), memo)
				memo[ir.OpID(p)] = m
			}
			out = append(out, m...)
		}
	}
	return out
}

// pos is a step's place in its threadblock before nops are added.
func pos(s *estep) int { return s.at }

// fuse finds each recv into the slots buffer whose slot one copy or reduce consumes, which
// together are an MSCCL r or rrc step (the reverse of what Build expands them to).
func (e *exporter) fuse() map[ir.OpID]*estep {
	g := e.g
	out := map[ir.OpID]*estep{}
	if e.slots == ir.None {
		return out
	}
	type use struct {
		off, end int64
		op       ir.OpID
	}
	uses := map[int][]use{}
	for i := range g.Ops {
		o := &g.Ops[i]
		for _, s := range []ir.Slice{o.Src, o.Dst} {
			if s.Buf == e.slots {
				uses[int(o.Rank)] = append(uses[int(o.Rank)], use{s.Off, s.Off + s.Len, ir.OpID(i)})
			}
		}
	}
	for _, us := range uses {
		slices.SortFunc(us, func(a, b use) int { return cmpInts(int(a.off), int(b.off), int(a.op), int(b.op)) })
		var maxLen int64
		for _, u := range us {
			maxLen = max(maxLen, u.end-u.off)
		}
		for _, u := range us {
			rx := &g.Ops[u.op]
			if rx.Kind != ir.OpRecv || rx.Dst.Buf != e.slots {
				continue
			}
			// Every other op touching the slot.
			var others []ir.OpID
			i := sort.Search(len(us), func(i int) bool { return us[i].off >= u.off-maxLen })
			for ; i < len(us) && us[i].off < u.end; i++ {
				if us[i].end > u.off && us[i].op != u.op && !slices.Contains(others, us[i].op) {
					others = append(others, us[i].op)
				}
			}
			if len(others) != 1 {
				continue
			}
			c := &g.Ops[others[0]]
			if c.Src != rx.Dst || !slices.Contains(g.Preds(others[0]), int32(u.op)) {
				continue
			}
			switch c.Kind {
			case ir.OpCopy:
				out[u.op] = &estep{typ: "r", ops: []ir.OpID{u.op, others[0]}, dst: c.Dst}
			case ir.OpReduce:
				out[u.op] = &estep{typ: "rrc", ops: []ir.OpID{u.op, others[0]}, src: c.Dst, dst: c.Dst}
			}
		}
	}
	return out
}

// topoOrder is an order of all ops that every execution allows: after edges, queue order, and a
// send before its matching recv.
func (e *exporter) topoOrder() []ir.OpID {
	g := e.g
	n := len(g.Ops)
	indeg := make([]int, n)
	succ := make([][]ir.OpID, n)
	edge := func(a, b ir.OpID) {
		succ[a] = append(succ[a], b)
		indeg[b]++
	}
	for _, ed := range g.Edges {
		edge(ed.From, ed.To)
	}
	for q := range g.Queues {
		for _, side := range [][]ir.OpID{g.Queues[q].SendOps, g.Queues[q].RecvOps} {
			for i := 1; i < len(side); i++ {
				edge(side[i-1], side[i])
			}
		}
	}
	for i := range g.Ops {
		if o := &g.Ops[i]; o.Kind == ir.OpSend && o.Match != ir.None {
			edge(ir.OpID(i), o.Match)
		}
	}
	var order, ready []ir.OpID
	for i := n - 1; i >= 0; i-- {
		if indeg[i] == 0 {
			ready = append(ready, ir.OpID(i))
		}
	}
	order = topoOrder(order, ready, func(op ir.OpID) []ir.OpID { return succ[op] }, func(s ir.OpID) bool { indeg[s]--; return indeg[s] == 0 })
	return order
}

// ref is an MSCCL buffer and chunk offset for a plan slice.
// ref is where slice s of rank r is in the algorithm: buffer, offset and count in chunks.
func (e *exporter) ref(s ir.Slice, r int) (byte, int64, int64) {
	if !s.Valid() {
		return 0, -1, 0
	}
	m, off := e.mbuf[s.Buf], e.base[s.Buf]+s.Off
	if e.shift && m == 'o' {
		off -= int64(r) * e.blk
	}
	return m, off / e.chunk, s.Len / e.chunk
}

// attr is s as the value of an attribute in double quotes: quotes, <, & and line breaks
// escaped (the caller has checked that XML can hold every character, see notXML).
func attr(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// notXML describes the first character of s that XML 1.0 cannot hold, even escaped (most C0
// controls, U+FFFE, U+FFFF, a byte that is not UTF-8), or returns "" if XML can hold them all.
func notXML(s string) string {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Sprintf("the byte %#x, which is not UTF-8", s[i])
			}
		}
		if !(r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0xd7ff || r >= 0xe000 && r <= 0xfffd || r >= 0x10000) {
			return fmt.Sprintf("%U, which XML cannot hold", r)
		}
	}
	return ""
}

func (e *exporter) write(opt ExportOptions) []byte {
	g := e.g
	var b bytes.Buffer
	nch := 0
	for q := range g.Queues {
		nch = max(nch, e.chans[q]+1)
	}
	chunks := func(m byte) int64 {
		if m == e.blkOf {
			return e.blk / e.chunk
		}
		return e.size[m] / e.chunk
	}
	inplace := 0
	if e.inplace {
		inplace = 1
	}
	root := ""
	if e.root >= 0 {
		root = fmt.Sprintf(" root=\"%d\"", e.root)
	}
	fmt.Fprintf(&b, "<algo name=\"%s\" proto=\"%s\" nchannels=\"%d\" nchunksperloop=\"%d\" ngpus=\"%d\" coll=\"%s\"%s inplace=\"%d\" outofplace=\"%d\" minBytes=\"0\" maxBytes=\"%d\">\n",
		attr(g.Name), attr(opt.Proto), nch, max(chunks('i'), chunks('o')), g.Ranks, attr(opt.Coll), root, inplace, 1-inplace, int64(math.MaxInt64))
	for _, ts := range e.tbs {
		for _, t := range ts {
			for _, s := range t.steps {
				for _, d := range s.deps {
					d.hasdep = true
				}
			}
		}
	}
	for r := 0; r < g.Ranks; r++ {
		fmt.Fprintf(&b, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n", r, chunks('i'), chunks('o'), chunks('s'))
		for _, t := range e.tbs[r] {
			fmt.Fprintf(&b, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", t.id, t.send, t.recv, t.ch)
			i := 0
			for _, s := range t.steps {
				for _, d := range s.deps[min(1, len(s.deps)):] {
					fmt.Fprintf(&b, "      <step s=\"%d\" type=\"nop\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"0\" depid=\"%d\" deps=\"%d\" hasdep=\"0\"/>\n", i, d.tb.id, d.idx)
					i++
				}
				src, dst := s.src, s.dst
				sr, dr := r, r // the ranks of src and dst
				// A send names where its data lands, a receive where it comes from.
				switch s.typ {
				case "s":
					if m := e.stepOf[g.Ops[s.ops[0]].Match]; m != nil {
						dst, dr = m.dst, int(g.Ops[m.ops[0]].Rank)
					}
				case "r", "rrc":
					if m := g.Ops[s.ops[0]].Match; m != ir.None && s.typ == "r" {
						src, sr = g.Ops[m].Src, int(g.Ops[m].Rank)
					}
				}
				sb, so, cnt := e.ref(src, sr)
				db, do, dcnt := e.ref(dst, dr)
				if sb == 0 {
					sb = 'i'
				}
				if db == 0 {
					db = 'o'
				}
				cnt = max(cnt, dcnt)
				depid, deps := -1, -1
				if len(s.deps) > 0 {
					depid, deps = s.deps[0].tb.id, s.deps[0].idx
				}
				fmt.Fprintf(&b, "      <step s=\"%d\" type=\"%s\" srcbuf=\"%c\" srcoff=\"%d\" dstbuf=\"%c\" dstoff=\"%d\" cnt=\"%d\" depid=\"%d\" deps=\"%d\" hasdep=\"%d\"/>\n",
					i, s.typ, sb, so, db, do, cnt, depid, deps, boolInt(s.hasdep))
				i++
			}
			b.WriteString("    </tb>\n")
		}
		b.WriteString("  </gpu>\n")
	}
	b.WriteString("</algo>\n")
	return b.Bytes()
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// collExpect is the postcondition that says which collective the plan is, as MSCCL names them:
// the first of its kind coll, or with coll "" the first that MSCCL has a coll for. Nil for none.
// A reduce_scatter into one block (ir.Expect.DstBlock) or with counts (ir.Expect.Vec) lays its
// output out otherwise than the exporter does, and says nothing here.
func collExpect(g *ir.Graph, coll string) *ir.Expect {
	for i := range g.Expects {
		x := &g.Expects[i]
		if x.DstBlock || x.Vec != nil {
			continue
		}
		k := x.Kind.String()
		if k == coll || coll == "" && slices.Contains(mscclColls, k) {
			return x
		}
	}
	return nil
}

// mscclColls are the coll values of MSCCL-IR with a standard meaning.
var mscclColls = []string{"allreduce", "allgather", "reduce", "broadcast", "alltoall", "reduce_scatter"}

// topoOrder appends to order the nodes reachable from ready in a topological order (Kahn's
// algorithm, the latest ready node first): release(x) drops one of x's pending predecessors and
// says whether none are left.
func topoOrder[T any](order, ready []T, succ func(T) []T, release func(T) bool) []T {
	for len(ready) > 0 {
		x := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		order = append(order, x)
		for _, y := range succ(x) {
			if release(y) {
				ready = append(ready, y)
			}
		}
	}
	return order
}
