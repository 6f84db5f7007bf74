package dsl

import (
	"strconv"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/intlit"
)

// converter turns the participle grammar structs into the public AST, checking what the grammar
// leaves open (literal values, functions named by keywords) and computing exact spans.
type converter struct {
	file string
	errs *diag.List
}

func pos(p lexer.Position) diag.Pos {
	return diag.At(p.Filename, p.Line, p.Column)
}

// span covers the tokens a grammar struct matched.
func span(toks []lexer.Token) Span {
	if len(toks) == 0 {
		return Span{}
	}
	return Span{From: tokPos(toks[0]), To: tokEnd(toks[len(toks)-1])}
}

// wordSpan is the span of a single word starting at p.
func wordSpan(p lexer.Position, word string) Span {
	from := pos(p)
	to := from
	to.Col += uint32(len(word))
	return Span{From: from, To: to}
}

func (c *converter) ident(g *gIdent) *Ident {
	if g == nil {
		return nil
	}
	return &Ident{Span: wordSpan(g.Pos, g.Name), Name: g.Name}
}

func word(p lexer.Position, name string) *Ident {
	return &Ident{Span: wordSpan(p, name), Name: name}
}

func (c *converter) stmts(gs []*gStmt) []Stmt {
	out := make([]Stmt, 0, len(gs))
	for _, g := range gs {
		if s := c.stmt(g); s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (c *converter) block(g *gBlock) []Stmt {
	return c.stmts(g.Stmts)
}

func (c *converter) stmt(g *gStmt) Stmt {
	switch {
	case g.Plan != nil:
		return &PlanStmt{Span: span(g.Plan.Tokens), Name: c.ident(g.Plan.Name)}
	case g.Param != nil:
		return &ParamStmt{Span: span(g.Param.Tokens), Name: word(g.Param.Name.Pos, g.Param.Name.Name), Value: c.expr(g.Param.Value)}
	case g.Let != nil:
		if t := g.Let.Table; t != nil {
			return &LetStmt{Span: span(g.Let.Tokens), Name: c.ident(g.Let.Name), Value: c.table(t)}
		}
		return &LetStmt{Span: span(g.Let.Tokens), Name: c.ident(g.Let.Name), Value: c.expr(g.Let.Value)}
	case g.Buffer != nil:
		b := g.Buffer
		s := &BufferStmt{
			Span:   span(b.Tokens),
			Name:   c.ident(b.Name),
			Type:   word(b.Type.Pos, b.Type.Name),
			Count:  c.expr(b.Count),
			Extern: b.Extern,
		}
		for _, a := range b.Access {
			s.Access = append(s.Access, word(a.Pos, a.Name))
		}
		if b.Init != nil {
			s.Init = c.expr(b.Init)
		}
		return s
	case g.Queue != nil:
		q := g.Queue
		s := &QueueStmt{Span: span(q.Tokens), Name: c.name(q.Name), To: c.expr(q.To)}
		if q.Peer != nil {
			s.Peer = c.name(q.Peer)
		}
		if q.Depth != nil {
			s.Depth = c.expr(q.Depth)
		}
		return s
	case g.Op != nil:
		return &OpStmt{Span: span(g.Op.Tokens), Name: c.name(g.Op.Name), Op: c.operation(g.Op.Op), After: c.names(g.Op.After)}
	case g.Dep != nil:
		return &DepStmt{Span: span(g.Dep.Tokens), Ops: c.names(g.Dep.Ops), After: c.names(g.Dep.After)}
	case g.For != nil:
		f := g.For
		s := &ForStmt{Span: span(f.Tokens), Var: c.ident(f.Var), From: c.expr(f.From), To: c.expr(f.To), Body: c.block(f.Body)}
		s.Lbrace, s.Rbrace = braces(f.Body)
		if f.Step != nil {
			s.Step = c.expr(f.Step)
		}
		return s
	case g.If != nil:
		return c.ifStmt(g.If)
	case g.Var != nil:
		return &VarStmt{Span: span(g.Var.Tokens), Name: c.ident(g.Var.Name), Value: c.expr(g.Var.Value)}
	case g.Assign != nil:
		a := g.Assign
		return &AssignStmt{Span: span(a.Tokens), Name: c.ident(a.Name), Op: a.Op.Op, OpPos: pos(a.Op.Pos), Value: c.expr(a.Value)}
	case g.Assert != nil:
		a := g.Assert
		s := &AssertStmt{Span: span(a.Tokens), Cond: c.expr(a.Cond)}
		if a.Msg != nil {
			s.Msg = c.str(a.Msg.Pos, a.Msg.Value)
		}
		return s
	case g.Def != nil:
		d := g.Def
		s := &DefStmt{Span: span(d.Tokens), Name: c.ident(d.Name), Body: c.expr(d.Body), Params: []*Ident{}}
		for _, p := range d.Params {
			s.Params = append(s.Params, c.ident(p))
		}
		return s
	case g.Expect != nil:
		e := g.Expect
		if v := e.Value; v != nil {
			s := &ExpectStmt{Span: span(e.Tokens), Slice: c.slice(v.Dst), Value: c.expr(v.Value), If: c.expr(v.If)}
			if v.On != nil {
				s.OnRank, s.OnLo, s.OnHi = c.expr(v.On.Rank), c.expr(v.On.Lo), c.expr(v.On.Hi)
			}
			return s
		}
		s := &ExpectStmt{Span: span(e.Tokens), Kind: word(e.Kind.Pos, e.Kind.Name), Dst: c.ident(e.Dst), Src: c.ident(e.Src)}
		if e.Op != nil {
			s.Op = word(e.Op.Pos, e.Op.Name)
		}
		if e.Root != nil {
			s.Root = c.expr(e.Root)
		}
		if v := e.DstV; v != nil {
			s.DstCounts, s.DstDispls = c.ident(v.Counts), c.ident(v.Displs)
		}
		if v := e.SrcV; v != nil {
			s.SrcCounts, s.SrcDispls = c.ident(v.Counts), c.ident(v.Displs)
		}
		return s
	}
	return nil
}

func (c *converter) ifStmt(g *gIf) *IfStmt {
	s := &IfStmt{Span: span(g.Tokens), Cond: c.expr(g.Cond), Then: c.block(g.Then)}
	s.Lbrace, s.Rbrace = braces(g.Then)
	switch {
	case g.ElseIf != nil:
		s.Else = []Stmt{c.ifStmt(g.ElseIf)}
		s.ElseIf = true
	case g.Else != nil:
		s.Else = c.block(g.Else)
		s.ElseLbrace, s.ElseRbrace = braces(g.Else)
		if s.Else == nil {
			s.Else = []Stmt{} // present but empty: keep `else {}` distinguishable from no else
		}
	}
	if s.Then == nil {
		s.Then = []Stmt{}
	}
	return s
}

// str converts a string literal; its escapes are Go's.
func (c *converter) str(p lexer.Position, raw string) *StringLit {
	sp := wordSpan(p, raw)
	v, err := strconv.Unquote(raw)
	if err != nil {
		c.errs.Add(diag.Syntax, sp.From, "invalid string %s: the escapes are Go's (\\\" \\\\ \\n \\t)", raw)
	}
	return &StringLit{Span: sp, Raw: raw, Value: v}
}

// braces returns the positions of a block's "{" and "}".
func braces(g *gBlock) (diag.Pos, diag.Pos) {
	return tokPos(g.Tokens[0]), tokPos(g.Tokens[len(g.Tokens)-1])
}

func (c *converter) names(gs []*gName) []*Name {
	if len(gs) == 0 {
		return nil
	}
	out := make([]*Name, len(gs))
	for i, g := range gs {
		out[i] = c.name(g)
	}
	return out
}

func (c *converter) name(g *gName) *Name {
	n := &Name{Span: span(g.Tokens), Ident: c.ident(g.Ident)}
	if len(g.Index) > 0 {
		n.Index = make([]Expr, len(g.Index))
		for i, x := range g.Index {
			n.Index[i] = c.expr(x)
		}
	}
	return n
}

func (c *converter) slice(g *gSlice) *Slice {
	if g == nil {
		return nil
	}
	if f := g.For; f != nil {
		return &Slice{Span: span(g.Tokens), For: &SliceFor{Slice: c.slice(f.Slice), Var: c.ident(f.Var),
			From: c.expr(f.From), To: c.expr(f.To), Step: c.expr(f.Step), Cond: c.expr(f.Cond)}}
	}
	s := &Slice{Span: span(g.Tokens), Buf: c.ident(g.Buf)}
	switch {
	case g.Colon:
		s.Kind, s.Lo, s.Hi = SliceRange, c.expr(g.Lo), c.expr(g.Hi)
	case g.Open:
		s.Kind, s.Lo = SliceElem, c.expr(g.Lo)
	}
	return s
}

// slices converts the further slices of a scatter/gather list (nil when there are none).
func (c *converter) slices(gs []*gSlice) []*Slice {
	var out []*Slice
	for _, g := range gs {
		out = append(out, c.slice(g))
	}
	return out
}

func (c *converter) operation(g *gOperation) Operation {
	switch {
	case g.Send != nil:
		return &SendOp{Span: span(g.Send.Tokens), Queue: c.name(g.Send.Queue), Slice: c.slice(g.Send.Slice), More: c.slices(g.Send.More), Inline: g.Send.Inline}
	case g.Recv != nil:
		return &RecvOp{Span: span(g.Recv.Tokens), Queue: c.name(g.Recv.Queue), Slice: c.slice(g.Recv.Slice), More: c.slices(g.Recv.More)}
	case g.Write != nil:
		w := g.Write
		return &WriteOp{Span: span(w.Tokens), Queue: c.name(w.Queue), Src: c.slice(w.Src), More: c.slices(w.More), Dst: c.slice(w.Dst), Notify: w.Notify}
	case g.Read != nil:
		r := g.Read
		return &ReadOp{Span: span(r.Tokens), Queue: c.name(r.Queue), Src: c.slice(r.Src), Dst: c.slice(r.Dst), More: c.slices(r.More)}
	case g.Atomic != nil:
		a := g.Atomic
		op := &AtomicOp{Span: span(a.Tokens), To: c.slice(a.To)}
		if a.Add != nil {
			op.Kind = word(a.Add.Pos, "add")
			op.Queue, op.Target, op.A = c.name(a.Add.Queue), c.slice(a.Add.Target), c.expr(a.Add.A)
		} else {
			op.Kind = word(a.Cas.Pos, "cas")
			op.Queue, op.Target = c.name(a.Cas.Queue), c.slice(a.Cas.Target)
			op.A, op.B = c.unary(a.Cas.A), c.unary(a.Cas.B)
		}
		return op
	case g.Reduce != nil:
		r := g.Reduce
		return &ReduceOp{Span: span(r.Tokens), Op: word(r.Op.Pos, r.Op.Name), Dst: c.slice(r.Dst), Src: c.slice(r.Src),
			DstMore: c.slices(r.DstMore), SrcMore: c.slices(r.SrcMore)}
	case g.Copy != nil:
		cp := g.Copy
		return &CopyOp{Span: span(cp.Tokens), Src: c.slice(cp.Src), Dst: c.slice(cp.Dst), SrcMore: c.slices(cp.SrcMore), DstMore: c.slices(cp.DstMore)}
	case g.Nop != nil:
		return &NopOp{Span: span(g.Nop.Tokens)}
	case g.Wait != nil:
		w := g.Wait
		if w.Word != nil {
			return &WaitOp{Span: span(w.Tokens), Word: c.slice(w.Word), Value: c.expr(w.Value)}
		}
		return &WaitOp{Span: span(w.Tokens), Count: c.unary(w.Count), Region: c.slice(w.Region)}
	}
	return nil
}

// binaryPrec is Go's precedence of the binary operators.
func binaryPrec(op string) int {
	switch op {
	case "*", "/", "%", "<<", ">>", "&":
		return 5
	case "+", "-", "|", "^":
		return 4
	case "==", "!=", "<", "<=", ">", ">=":
		return 3
	case "&&":
		return 2
	case "||":
		return 1
	}
	return 0
}

// expr arranges a flat operand/operator sequence into a tree (left-associative binary
// operators, Go's precedence) with an explicit stack, so long chains cost no recursion.
func (c *converter) expr(g *gExpr) Expr {
	if g == nil {
		return nil
	}
	if g.Cond != nil {
		return &CondExpr{Span: span(g.Tokens), Cond: c.expr(g.Cond.Cond), Then: c.expr(g.Cond.Then), Else: c.expr(g.Cond.Else)}
	}
	type pending struct {
		x     Expr
		op    string
		opPos diag.Pos
	}
	var stack []pending
	x := c.unary(g.First)
	for _, b := range g.Rest {
		prec := binaryPrec(b.Op)
		for len(stack) > 0 && binaryPrec(stack[len(stack)-1].op) >= prec {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			x = binary(top.x, top.op, top.opPos, x)
		}
		stack = append(stack, pending{x: x, op: b.Op, opPos: pos(b.Pos)})
		x = c.unary(b.Y)
	}
	for i := len(stack) - 1; i >= 0; i-- {
		x = binary(stack[i].x, stack[i].op, stack[i].opPos, x)
	}
	return x
}

// table converts a table; one built by a loop has exactly one element expression.
func (c *converter) table(g *gTable) Expr {
	t := &TableExpr{Span: span(g.Tokens)}
	for _, e := range g.Elems {
		t.Elems = append(t.Elems, c.expr(e))
	}
	if f := g.For; f != nil {
		if len(t.Elems) != 1 {
			c.errs.Add(diag.Syntax, pos(f.Pos), "a table built by a loop has one element expression before for: [f(j) for j in 0 .. n]")
		}
		t.For = &TableFor{Var: c.ident(f.Var), From: c.expr(f.From), To: c.expr(f.To), Step: c.expr(f.Step), Cond: c.expr(f.Cond)}
	}
	return t
}

func binary(x Expr, op string, opPos diag.Pos, y Expr) Expr {
	return &BinaryExpr{Span: Span{From: x.Pos(), To: y.End()}, Op: op, OpPos: opPos, X: x, Y: y}
}

// unary applies prefix operators (innermost last) to a power chain.
func (c *converter) unary(g *gUnary) Expr {
	x := c.primary(g.X)
	if g.Pow != nil {
		x = binary(x, "**", pos(g.Pow.Pos), c.unary(g.Pow.Y))
	}
	for i := len(g.Ops) - 1; i >= 0; i-- {
		x = &UnaryExpr{Span: Span{From: pos(g.Ops[i].Pos), To: x.End()}, Op: g.Ops[i].Op, X: x}
	}
	return x
}

func (c *converter) primary(g *gPrimary) Expr {
	sp := span(g.Tokens)
	switch {
	case g.Int != nil:
		v, msg := intlit.Value(*g.Int)
		if msg != "" {
			c.errs.Add(diag.Syntax, sp.From, "%s", msg)
		}
		return &IntLit{Span: sp, Raw: *g.Int, Value: v}
	case g.Float != nil:
		v, msg := parseFloat(*g.Float)
		if msg != "" {
			c.errs.Add(diag.Syntax, sp.From, "%s", msg)
		}
		return &FloatLit{Span: sp, Raw: *g.Float, Value: v}
	case g.Paren != nil:
		return &ParenExpr{Span: sp, X: c.expr(g.Paren)}
	case g.World != nil:
		return &Ident{Span: sp, Name: *g.World}
	}
	n := g.Named
	id := &Ident{Span: wordSpan(n.Tokens[0].Pos, n.Name), Name: n.Name}
	switch {
	case !n.Call && (n.Name == "min" || n.Name == "max"):
		c.errs.Add(diag.Syntax, id.From, "%q is a reserved keyword and cannot be used as a name; as a function write %s(a, b)", n.Name, n.Name)
	}
	if n.Index != nil {
		if n.At != nil {
			return &InitExpr{Span: span(n.Tokens), Buf: id, Index: c.expr(n.Index), Rank: c.primary(n.At)}
		}
		return &IndexExpr{Span: span(n.Tokens), Table: id, Index: c.expr(n.Index)}
	}
	if !n.Call {
		return id
	}
	call := &CallExpr{Span: span(n.Tokens), Fun: id}
	for _, a := range n.Args {
		call.Args = append(call.Args, c.expr(a))
	}
	return call
}
