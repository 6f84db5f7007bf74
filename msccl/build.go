package msccl

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// Options say how an algorithm becomes a plan.
type Options struct {
	// Elem is the element type of the buffers (u8 i32 u32 i64 u64 f32 f64); "" is f32.
	Elem string
	// Import lays the plan out for `coredag import msccl`: each statement on a line of its
	// own and each op commented with the XML line it came from. Without it every node's
	// position is its XML element's, for diagnostics.
	Import bool
}

// DefaultChunk is the value of the chunk param (elements per chunk) when -p does not set it.
const DefaultChunk = 64

// Names the plan gives the MSCCL buffers, and the buffer of receive slots.
const (
	BufInput   = "input"
	BufOutput  = "output"
	BufScratch = "scratch"
	BufInplace = "data" // input and output of an in-place algorithm: one buffer
	BufSlots   = "slots"
)

// Convert reads an MSCCL-IR algorithm and returns it as a .dag plan (see docs/msccl.md for what
// maps to what). Errors are a diag.List positioned in the XML.
func Convert(filename string, src []byte, opt Options) (*dsl.File, error) {
	a, err := Parse(filename, src)
	if err != nil {
		return nil, err
	}
	return Build(filename, a, opt)
}

// Build converts a parsed algorithm.
func Build(filename string, a *Algo, opt Options) (*dsl.File, error) {
	elem := opt.Elem
	if elem == "" {
		elem = "f32"
	}
	if _, ok := ir.ParseElemType(elem); !ok {
		return nil, diag.List{diag.Errorf(diag.Shape, diag.InFile(filename), "element type %q: one of u8, i32, u32, i64, u64, f32, f64", elem)}
	}
	if errs := check(a); len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	b := &builder{file: filename, base: diag.QuoteName(filepath.Base(filename)), a: a, imp: opt.Import, elem: elem}
	return b.build(), nil
}

type builder struct {
	file, base string // base: the file's name for comments, quoted if it holds a line break
	a          *Algo
	imp        bool
	elem       string
	line       uint32
	comments   []*dsl.Comment
}

// span is the extent of a statement made from the XML element at p: p itself, or with Import
// the next line of the output.
func (b *builder) span(p diag.Pos) dsl.Span {
	if !b.imp {
		return dsl.Span{From: p, To: p}
	}
	b.line++
	return dsl.Span{From: diag.Pos{Line: b.line, Col: 1}, To: diag.Pos{Line: b.line, Col: 2}}
}

// comment adds, with Import, a comment after the statement of sp (on its line) or, with own,
// on a line of its own. Values from the XML in text are quoted (diag.QuoteName, %q); a line
// break left in text would end the comment and start a statement, so it is escaped too.
func (b *builder) comment(sp dsl.Span, own bool, text string) {
	if !b.imp {
		return
	}
	text = strings.ReplaceAll(diag.EscapeControls(text), "\n", `\n`)
	p := diag.Pos{Line: sp.From.Line, Col: 3}
	if own {
		b.line++
		p = diag.Pos{Line: b.line, Col: 1}
	}
	b.comments = append(b.comments, &dsl.Comment{Span: dsl.Span{From: p, To: p}, Text: "# " + text})
}

// blank leaves, with Import, an empty line.
func (b *builder) blank() { b.line++ }

func ident(sp dsl.Span, name string) *dsl.Ident { return &dsl.Ident{Span: sp, Name: name} }

func lit(sp dsl.Span, v int64) *dsl.IntLit {
	return &dsl.IntLit{Span: sp, Raw: strconv.FormatInt(v, 10), Value: v}
}

func bin(sp dsl.Span, op string, x, y dsl.Expr) *dsl.BinaryExpr {
	return &dsl.BinaryExpr{Span: sp, Op: op, OpPos: sp.From, X: x, Y: y}
}

// chunks is the expression for n chunks: 0, chunk or n * chunk.
func chunks(sp dsl.Span, n int) dsl.Expr {
	switch n {
	case 0:
		return lit(sp, 0)
	case 1:
		return ident(sp, "chunk")
	}
	return bin(sp, "*", lit(sp, int64(n)), ident(sp, "chunk"))
}

func name(sp dsl.Span, base string, idx ...int) *dsl.Name {
	n := &dsl.Name{Span: sp, Ident: ident(sp, base)}
	for _, i := range idx {
		n.Index = append(n.Index, lit(sp, int64(i)))
	}
	return n
}

// planName turns the algorithm's name into an identifier.
func planName(s string) string {
	var out strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r >= '0' && r <= '9' && out.Len() > 0:
			out.WriteRune(r)
		case out.Len() > 0:
			out.WriteByte('_')
		}
	}
	n := strings.TrimRight(out.String(), "_")
	if n == "" || dsl.IsKeyword(n) {
		n = "msccl_" + n
	}
	return strings.TrimRight(n, "_")
}

// bufRef maps an MSCCL buffer of GPU g to the plan's buffer and the chunk where it starts.
func (b *builder) bufRef(g *GPU, buf byte) (string, int) {
	if b.a.Inplace && buf != 's' {
		return BufInplace, aliasOffset(b.a, buf, g)
	}
	return map[byte]string{'i': BufInput, 'o': BufOutput, 's': BufScratch}[buf], aliasOffset(b.a, buf, g)
}

func (b *builder) slice(sp dsl.Span, g *GPU, buf byte, off, cnt int) *dsl.Slice {
	n, base := b.bufRef(g, buf)
	return b.rawSlice(sp, n, base+off, cnt)
}

func (b *builder) rawSlice(sp dsl.Span, buf string, off, cnt int) *dsl.Slice {
	return &dsl.Slice{Span: sp, Kind: dsl.SliceRange, Buf: ident(sp, buf), Lo: chunks(sp, off), Hi: chunks(sp, off+cnt)}
}

func (b *builder) build() *dsl.File {
	a := b.a
	f := &dsl.File{Name: b.file}
	var stmts []dsl.Stmt
	add := func(s dsl.Stmt) { stmts = append(stmts, s) }

	if b.imp {
		b.comment(dsl.Span{}, true, fmt.Sprintf("Imported from %s: MSCCL-IR algorithm %q, coll=%s, inplace=%d, proto=%s, nchannels=%d.", b.base, a.Name, diag.QuoteName(a.Coll), boolInt(a.Inplace), diag.QuoteName(a.Proto), a.NChannels))
		b.comment(dsl.Span{}, true, "Each op names the XML line of its step; docs/msccl.md says how steps become ops.")
		b.blank()
	}
	sp := b.span(a.Pos)
	add(&dsl.PlanStmt{Span: sp, Name: ident(sp, planName(a.Name))})
	b.blank()
	sp = b.span(a.Pos)
	add(&dsl.ParamStmt{Span: sp, Name: ident(sp, "ranks"), Value: lit(sp, int64(a.NGPUs))})
	sp = b.span(a.Pos)
	add(&dsl.ParamStmt{Span: sp, Name: ident(sp, "chunk"), Value: lit(sp, DefaultChunk)})
	b.comment(sp, false, "elements per chunk (-p chunk=N)")
	b.blank()

	// Buffer sizes: the largest over the GPUs (buffers are symmetric).
	sizes := map[string]int{}
	var order []string
	need := func(n string, c int) {
		if _, ok := sizes[n]; !ok {
			order = append(order, n)
		}
		sizes[n] = max(sizes[n], c)
	}
	slots := make([]int, len(a.GPUs))
	for gi, g := range a.GPUs {
		for _, buf := range []byte{'i', 'o', 's'} {
			c := map[byte]int{'i': g.IChunks, 'o': g.OChunks, 's': g.SChunks}[buf]
			if c == 0 {
				continue
			}
			n, base := b.bufRef(g, buf)
			need(n, base+c)
		}
		for _, t := range g.TBs {
			for _, s := range t.Steps {
				if stepKinds[s.Type].recv {
					slots[gi] += s.Cnt
				}
			}
		}
		if slots[gi] > 0 {
			need(BufSlots, slots[gi])
		}
	}
	for _, n := range order {
		sp := b.span(a.Pos)
		bs := &dsl.BufferStmt{Span: sp, Name: ident(sp, n), Type: ident(sp, b.elem), Count: chunks(sp, sizes[n])}
		if n == BufInput || n == BufInplace {
			// Distinct values per rank and element, so a run shows where every chunk went.
			bs.Init = bin(sp, "+", bin(sp, "*", ident(sp, "rank"), lit(sp, 1000)), ident(sp, "i"))
		}
		add(bs)
		if n == BufSlots {
			b.comment(sp, false, "one slot per received chunk: the connection buffers data arrives in")
		}
	}
	for gi, g := range a.GPUs {
		b.blank()
		add(b.gpu(g, gi))
	}
	if p, ok := postcondition(a); ok {
		add(b.expect(p))
	}
	if b.imp {
		b.line++
	}
	f.Stmts = stmts
	f.Comments = b.comments
	f.Span = dsl.Span{From: diag.At(b.file, 1, 1), To: diag.Pos{Line: b.line + 1, Col: 1}}
	if !b.imp {
		f.Span = dsl.Span{From: a.Pos, To: a.Pos}
	}
	return f
}

// expect is the statement of the algorithm's postcondition, positioned at the coll attribute:
// a proof that fails points there.
func (b *builder) expect(p Postcondition) *dsl.ExpectStmt {
	at := b.a.attrs.at("coll")
	if b.imp {
		b.blank()
		b.comment(dsl.Span{}, true, fmt.Sprintf("%s:%d: what coll=%q inplace=%d promise; `coredag check` proves it.", b.base, at.Line, b.a.Coll, boolInt(b.a.Inplace)))
	}
	sp := b.span(at)
	e := &dsl.ExpectStmt{Span: sp, Kind: ident(sp, p.Coll), Dst: ident(sp, p.Dst)}
	if p.Op != "" {
		e.Op = ident(sp, p.Op)
	}
	if p.Src != "" {
		e.Src = ident(sp, p.Src)
	}
	if p.Root >= 0 {
		e.Root = lit(sp, int64(p.Root))
	}
	return e
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// gpu is `if rank == ID { queues; ops }`.
func (b *builder) gpu(g *GPU, gi int) dsl.Stmt {
	sp := b.span(g.Pos)
	is := &dsl.IfStmt{Span: sp, Cond: bin(sp, "==", ident(sp, "rank"), lit(sp, int64(g.ID))), Lbrace: sp.From}
	b.comment(sp, false, fmt.Sprintf("%s:%d: GPU %d", b.base, g.Pos.Line, g.ID))

	// Queues: one per peer and channel that a step sends to or receives from.
	type qkey struct{ peer, ch int }
	var queues []qkey
	qpos := map[qkey]diag.Pos{}
	depth := map[qkey][2]int{}
	for _, t := range g.TBs {
		for _, s := range t.Steps {
			k := stepKinds[s.Type]
			for _, x := range []struct {
				on   bool
				peer int
				side int
			}{{k.send, t.Send, 0}, {k.recv, t.Recv, 1}} {
				if !x.on {
					continue
				}
				q := qkey{x.peer, t.Chan}
				if _, ok := qpos[q]; !ok {
					queues = append(queues, q)
					qpos[q] = t.Pos
				}
				d := depth[q]
				d[x.side]++
				depth[q] = d
			}
		}
	}
	for _, q := range queues {
		sp := b.span(qpos[q])
		qs := &dsl.QueueStmt{Span: sp, Name: name(sp, "link", q.peer, q.ch), To: lit(sp, int64(q.peer)), Peer: name(sp, "link", g.ID, q.ch)}
		if d := max(depth[q][0], depth[q][1]); d > 128 {
			qs.Depth = lit(sp, int64(min(d, 32768)))
		}
		is.Then = append(is.Then, qs)
	}

	// End ops of every step, for dependencies.
	slot := 0
	for _, t := range g.TBs {
		b.blank()
		if b.imp {
			b.comment(dsl.Span{}, true, fmt.Sprintf("%s:%d: threadblock %d (send %d, recv %d, channel %d)", b.base, t.Pos.Line, t.ID, t.Send, t.Recv, t.Chan))
		}
		for i, s := range t.Steps {
			is.Then = append(is.Then, b.step(g, t, i, s, &slot)...)
		}
	}
	end := b.span(g.Pos)
	is.Rbrace = end.From
	is.To = end.To
	return is
}

// endOp is the name of the op that ends step i of threadblock t: what later steps wait for.
func endOp(g *GPU, t *TB, i int) (string, int, int) {
	s := t.Steps[i]
	k := stepKinds[s.Type]
	switch {
	case k.send:
		return "tx", t.ID, i
	case k.reduce && (k.copy || !k.recv):
		return "red", t.ID, i
	case k.copy:
		return "cp", t.ID, i
	}
	return "dep", t.ID, i
}

// step expands one step into ops, in the order they run (docs/msccl.md).
func (b *builder) step(g *GPU, t *TB, i int, s *Step, slot *int) []dsl.Stmt {
	k := stepKinds[s.Type]
	var starts []*dsl.Name
	var out []dsl.Stmt
	// The parts of an op point at the step in the XML, whatever the layout: diagnostics about
	// a slice or a queue name show the step.
	sp := dsl.Span{From: s.Pos, To: s.Pos}
	op := func(base string, o dsl.Operation, after ...*dsl.Name) *dsl.Name {
		st := b.span(s.Pos)
		setSpan(o, st)
		out = append(out, &dsl.OpStmt{Span: st, Name: name(st, base, t.ID, i), Op: o, After: after})
		b.comment(st, false, fmt.Sprintf("%s:%d: %s", b.base, s.Pos.Line, s.Type))
		return name(sp, base, t.ID, i)
	}
	ref := func(base string, tb, step int) *dsl.Name { return name(sp, base, tb, step) }
	if i > 0 {
		starts = append(starts, ref(endOp(g, t, i-1)))
	}
	if s.DepID >= 0 {
		for _, d := range g.TBs {
			if d.ID == s.DepID && d != t { // steps of one threadblock run in order anyway
				starts = append(starts, ref(endOp(g, d, s.Deps)))
			}
		}
	}
	withStarts := func(n ...*dsl.Name) []*dsl.Name { return append(n, starts...) }
	src := func(sp dsl.Span) *dsl.Slice { return b.slice(sp, g, s.SrcBuf, s.SrcOff, s.Cnt) }
	dst := func(sp dsl.Span) *dsl.Slice { return b.slice(sp, g, s.DstBuf, s.DstOff, s.Cnt) }
	sendQ := func(sp dsl.Span) *dsl.Name { return name(sp, "link", t.Send, t.Chan) }
	recvQ := func(sp dsl.Span) *dsl.Name { return name(sp, "link", t.Recv, t.Chan) }
	slotSlice := func(sp dsl.Span) *dsl.Slice { return b.rawSlice(sp, BufSlots, *slot, s.Cnt) }
	sum := func(sp dsl.Span) *dsl.Ident { return ident(sp, "sum") }

	switch s.Type {
	case "s":
		op("tx", &dsl.SendOp{Queue: sendQ(sp), Slice: src(sp)}, starts...)
	case "r", "rcs":
		rx := op("rx", &dsl.RecvOp{Queue: recvQ(sp), Slice: slotSlice(sp)})
		cp := op("cp", &dsl.CopyOp{Src: slotSlice(sp), Dst: dst(sp)}, withStarts(rx)...)
		if k.send {
			op("tx", &dsl.SendOp{Queue: sendQ(sp), Slice: dst(sp)}, cp)
		}
	case "rrs":
		rx := op("rx", &dsl.RecvOp{Queue: recvQ(sp), Slice: slotSlice(sp)})
		red := op("red", &dsl.ReduceOp{Op: sum(sp), Dst: slotSlice(sp), Src: src(sp)}, withStarts(rx)...)
		op("tx", &dsl.SendOp{Queue: sendQ(sp), Slice: slotSlice(sp)}, red)
	case "rrc", "rrcs":
		deps := starts
		if s.SrcBuf != s.DstBuf || s.SrcOff != s.DstOff {
			deps = []*dsl.Name{op("cp", &dsl.CopyOp{Src: src(sp), Dst: dst(sp)}, starts...)}
		}
		rx := op("rx", &dsl.RecvOp{Queue: recvQ(sp), Slice: slotSlice(sp)})
		red := op("red", &dsl.ReduceOp{Op: sum(sp), Dst: dst(sp), Src: slotSlice(sp)}, append([]*dsl.Name{rx}, deps...)...)
		if k.send {
			op("tx", &dsl.SendOp{Queue: sendQ(sp), Slice: dst(sp)}, red)
		}
	case "cpy":
		if s.SrcBuf == s.DstBuf && s.SrcOff == s.DstOff {
			// A copy onto itself changes nothing; it still orders the steps around it.
			op("cp", &dsl.NopOp{}, starts...)
		} else {
			op("cp", &dsl.CopyOp{Src: src(sp), Dst: dst(sp)}, starts...)
		}
	case "re":
		op("red", &dsl.ReduceOp{Op: sum(sp), Dst: dst(sp), Src: src(sp)}, starts...)
	case "nop":
		op("dep", &dsl.NopOp{}, starts...)
	}
	if k.recv {
		*slot += s.Cnt
	}
	return out
}

// setSpan gives an operation and its parts the span of its statement (the builders above make
// the parts before the statement's span is known).
func setSpan(o dsl.Operation, sp dsl.Span) {
	switch o := o.(type) {
	case *dsl.SendOp:
		o.Span = sp
	case *dsl.RecvOp:
		o.Span = sp
	case *dsl.CopyOp:
		o.Span = sp
	case *dsl.ReduceOp:
		o.Span = sp
	case *dsl.NopOp:
		o.Span = sp
	}
}
