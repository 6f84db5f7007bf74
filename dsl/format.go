package dsl

import (
	"bytes"
	"math"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
)

// Format prints f in canonical form, like gofmt: one statement per line, blocks indented by two
// spaces, single spaces around binary operators, numbers and parentheses as written, comments
// kept (own-line comments at the indentation of the code they precede, trailing comments aligned
// in runs), and blank lines kept but collapsed to one. Formatting is idempotent and
// Parse(Format(f)) equals f up to positions.
func Format(f *File) []byte {
	p := &printer{comments: append([]*Comment(nil), f.Comments...)}
	sort.SliceStable(p.comments, func(i, j int) bool { return before(p.comments[i].From, p.comments[j].From) })
	p.stmts(f.Stmts, 0)
	p.flush(endOfFile, 0) // comments after the last statement
	return p.render()
}

// line is one output line before declarations and trailing comments are aligned.
type line struct {
	indent  int
	text    string // "" for a blank line or an own-line comment (then in comment)
	comment string
	opener  bool // ends with "{": no blank line may follow

	// A declaration's text is head + " " + tail; in a run of consecutive declarations of one
	// kind the heads are padded to one width, so `=`, types and `to` line up as in docs/language.md.
	kind       string // "op", "let", "param", "buffer", "queue"; "" for other lines
	head, tail string
}

type printer struct {
	comments []*Comment
	next     int // first comment not yet printed
	out      []line
	lastLine int // source line of the last printed code or comment, 0 at the start
}

// blankBefore emits one blank line when the source had one or more before srcLine.
func (p *printer) blankBefore(srcLine int) {
	if p.lastLine == 0 || srcLine <= p.lastLine+1 || len(p.out) == 0 {
		return
	}
	if last := p.out[len(p.out)-1]; last.opener || (last.text == "" && last.comment == "") {
		return
	}
	p.out = append(p.out, line{})
}

// before reports whether position a comes before b in the file (both from the same file).
func before(a, b diag.Pos) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
}

// endOfFile is a position after every other.
var endOfFile = diag.Pos{Line: math.MaxUint32, Col: math.MaxUint32}

// flush prints the comments that start before pos (all of them for endOfFile) at indent. A
// comment on the source line where the last printed code ended becomes that line's trailing
// comment.
func (p *printer) flush(pos diag.Pos, indent int) {
	for p.next < len(p.comments) && before(p.comments[p.next].From, pos) {
		c := p.comments[p.next]
		p.next++
		text := strings.TrimRight(c.Text, " \t\r\f\v")
		if n := len(p.out); n > 0 && int(c.From.Line) == p.lastLine && p.out[n-1].text != "" && p.out[n-1].comment == "" {
			p.out[n-1].comment = text
			continue
		}
		p.blankBefore(int(c.From.Line))
		p.out = append(p.out, line{indent: indent, comment: text})
		p.lastLine = int(c.To.Line)
	}
}

// code prints a line of code that came from source lines from..to.
func (p *printer) code(indent int, text string, from, to int, opener bool) {
	p.blankBefore(from)
	p.out = append(p.out, line{indent: indent, text: text, opener: opener})
	p.lastLine = to
}

func (p *printer) stmts(list []Stmt, indent int) {
	for _, s := range list {
		p.flush(s.Pos(), indent)
		p.stmt(s, indent)
	}
}

func (p *printer) stmt(s Stmt, indent int) {
	switch s.(type) {
	case *ForStmt, *IfStmt:
		if p.oneLine(s) {
			p.code(indent, oneLineText(s), int(s.Pos().Line), int(s.End().Line), false)
			return
		}
	}
	switch s := s.(type) {
	case *ForStmt:
		p.flush(s.Lbrace, indent) // comments inside the header move above it
		var b strings.Builder
		writeRange(&b, s.Var.Name, s.From, s.To, s.Step)
		b.WriteString(" {")
		p.code(indent, b.String(), int(s.Pos().Line), lineOf(s.Lbrace, s.To.End()), true)
		p.block(s.Body, indent, s.Rbrace, s.End())
		p.out = append(p.out, line{indent: indent, text: "}"})
		p.lastLine = lineOf(s.Rbrace, s.End())
	case *IfStmt:
		p.ifStmt(s, indent, "if ")
		p.lastLine = lineOf(s.lastBrace(), s.End())
	default:
		p.flush(s.End(), indent) // comments inside a statement move above it
		p.blankBefore(int(s.Pos().Line))
		kind, head, tail := declParts(s)
		l := line{indent: indent, kind: kind, head: head, tail: tail, text: stmtText(s)}
		p.out = append(p.out, l)
		p.lastLine = int(s.End().Line)
	}
}

// oneLine reports whether a block statement stays on one line: the user wrote it on one line,
// each of its blocks holds one simple statement, and no comment sits inside it.
func (p *printer) oneLine(s Stmt) bool {
	if s.Pos().Line != s.End().Line {
		return false
	}
	simple := func(body []Stmt) bool {
		if len(body) != 1 {
			return false
		}
		switch body[0].(type) {
		case *ForStmt, *IfStmt:
			return false
		}
		return true
	}
	switch s := s.(type) {
	case *ForStmt:
		if !simple(s.Body) {
			return false
		}
	case *IfStmt:
		if !simple(s.Then) || s.ElseIf || (s.Else != nil && !simple(s.Else)) {
			return false
		}
	}
	for _, c := range p.comments[p.next:] {
		if !before(c.From, s.End()) {
			break
		}
		if before(s.Pos(), c.From) {
			return false
		}
	}
	return true
}

// oneLineText prints a one-line for or if: `if s > 0 { tx[s] after red[s - 1] }`.
func oneLineText(s Stmt) string {
	var b strings.Builder
	switch s := s.(type) {
	case *ForStmt:
		writeRange(&b, s.Var.Name, s.From, s.To, s.Step)
		b.WriteString(" { " + stmtText(s.Body[0]) + " }")
	case *IfStmt:
		b.WriteString("if ")
		writeExpr(&b, s.Cond)
		b.WriteString(" { " + stmtText(s.Then[0]) + " }")
		if s.Else != nil {
			b.WriteString(" else { " + stmtText(s.Else[0]) + " }")
		}
	}
	return b.String()
}

// writeRange prints "for v in from .. to [step step]", the header of a for statement and of a
// list of slices.
func writeRange(b *strings.Builder, v string, from, to, step Expr) {
	b.WriteString("for " + v + " in ")
	writeExpr(b, from)
	b.WriteString(" .. ")
	writeExpr(b, to)
	if step != nil {
		b.WriteString(" step ")
		writeExpr(b, step)
	}
}

// lineOf is the line of p, or of the fallback position when p is unknown (hand-built ASTs).
func lineOf(p, fallback diag.Pos) int {
	if p.IsValid() {
		return int(p.Line)
	}
	return int(fallback.Line)
}

// lastBrace is the closing brace of the whole if/else chain.
func (s *IfStmt) lastBrace() diag.Pos {
	for s.ElseIf && len(s.Else) == 1 {
		inner, ok := s.Else[0].(*IfStmt)
		if !ok {
			break
		}
		s = inner
	}
	if s.Else != nil && !s.ElseIf {
		return s.ElseRbrace
	}
	return s.Rbrace
}

// block prints a block's statements and the comments before its closing brace.
func (p *printer) block(body []Stmt, indent int, rbrace, fallback diag.Pos) {
	p.stmts(body, indent+1)
	end := rbrace
	if !rbrace.IsValid() {
		end = fallback
	}
	p.flush(end, indent+1)
}

// ifStmt prints an if (prefix "if " or "} else if ") and its else chain.
func (p *printer) ifStmt(s *IfStmt, indent int, prefix string) {
	p.flush(s.Lbrace, indent)
	var b strings.Builder
	b.WriteString(prefix)
	writeExpr(&b, s.Cond)
	b.WriteString(" {")
	p.code(indent, b.String(), int(s.Pos().Line), lineOf(s.Lbrace, s.Cond.End()), true)
	p.block(s.Then, indent, s.Rbrace, s.End())
	switch {
	case s.ElseIf && len(s.Else) == 1:
		if inner, ok := s.Else[0].(*IfStmt); ok {
			p.lastLine = lineOf(s.Rbrace, s.End())
			p.ifStmt(inner, indent, "} else if ")
			return
		}
		fallthrough
	case s.Else != nil:
		p.out = append(p.out, line{indent: indent, text: "} else {", opener: true})
		p.lastLine = lineOf(s.ElseLbrace, s.End())
		p.block(s.Else, indent, s.ElseRbrace, s.End())
	}
	p.out = append(p.out, line{indent: indent, text: "}"})
}

// render aligns runs of declarations and of trailing comments, and joins the lines.
func (p *printer) render() []byte {
	for i := 0; i < len(p.out); {
		j, width := i, 0
		for j < len(p.out) && p.out[j].kind != "" && p.out[j].kind == p.out[i].kind && p.out[j].indent == p.out[i].indent {
			width = max(width, len(p.out[j].head))
			j++
		}
		if j == i {
			i++
			continue
		}
		for ; i < j; i++ {
			l := &p.out[i]
			l.text = l.head + strings.Repeat(" ", width-len(l.head)+1) + l.tail
		}
	}
	var buf bytes.Buffer
	for i := 0; i < len(p.out); {
		// A run: consecutive code lines with trailing comments at one indentation.
		j, width := i, 0
		for j < len(p.out) && p.out[j].text != "" && p.out[j].comment != "" && p.out[j].indent == p.out[i].indent {
			width = max(width, len(p.out[j].text))
			j++
		}
		if j == i {
			writeLine(&buf, p.out[i], 0)
			i++
			continue
		}
		for ; i < j; i++ {
			writeLine(&buf, p.out[i], width)
		}
	}
	return buf.Bytes()
}

func writeLine(buf *bytes.Buffer, l line, width int) {
	if l.text == "" && l.comment == "" {
		buf.WriteByte('\n')
		return
	}
	buf.WriteString(strings.Repeat("  ", l.indent))
	buf.WriteString(l.text)
	if l.comment != "" {
		if l.text != "" {
			buf.WriteString(strings.Repeat(" ", width-len(l.text)+1))
		}
		buf.WriteString(l.comment)
	}
	buf.WriteByte('\n')
}

// declParts splits a declaration into the part whose width is aligned in a run and the rest:
// "op tx[s]" + "= send ...", "buffer data" + "f32[n] ...", "queue right" + "to ...".
func declParts(s Stmt) (kind, head, tail string) {
	text := stmtText(s)
	var cut string
	switch s := s.(type) {
	case *OpStmt:
		kind, cut = "op", " = "
	case *LetStmt:
		kind, cut = "let", " = "
	case *VarStmt:
		kind, cut = "var", " = "
	case *ParamStmt:
		kind, cut = "param", " = "
	case *BufferStmt:
		kind, head = "buffer", "buffer "+s.Name.Name
		return kind, head, strings.TrimPrefix(text, head+" ")
	case *QueueStmt:
		kind, cut = "queue", " to "
	default:
		return "", "", ""
	}
	i := strings.Index(text, cut)
	return kind, text[:i], text[i+1:]
}

// stmtText prints a simple (block-free) statement on one line.
func stmtText(s Stmt) string {
	var b strings.Builder
	switch s := s.(type) {
	case *PlanStmt:
		b.WriteString("plan " + s.Name.Name)
	case *ParamStmt:
		b.WriteString("param " + s.Name.Name + " = ")
		writeExpr(&b, s.Value)
	case *LetStmt:
		b.WriteString("let " + s.Name.Name + " = ")
		writeExpr(&b, s.Value)
	case *VarStmt:
		b.WriteString("var " + s.Name.Name + " = ")
		writeExpr(&b, s.Value)
	case *AssignStmt:
		b.WriteString(s.Name.Name + " " + s.Op + " ")
		writeExpr(&b, s.Value)
	case *AssertStmt:
		b.WriteString("assert ")
		writeExpr(&b, s.Cond)
		if s.Msg != nil {
			b.WriteString(", " + s.Msg.Raw)
		}
	case *DefStmt:
		b.WriteString("def " + s.Name.Name + "(")
		for i, p := range s.Params {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.Name)
		}
		b.WriteString(") = ")
		writeExpr(&b, s.Body)
	case *BufferStmt:
		b.WriteString("buffer " + s.Name.Name + " " + s.Type.Name + "[")
		writeExpr(&b, s.Count)
		b.WriteString("]")
		if s.Extern {
			b.WriteString(" extern")
		}
		for _, a := range s.Access {
			b.WriteString(" " + a.Name)
		}
		if s.Init != nil {
			b.WriteString(" init ")
			writeExpr(&b, s.Init)
		}
	case *QueueStmt:
		b.WriteString("queue ")
		writeName(&b, s.Name)
		b.WriteString(" to ")
		writeExpr(&b, s.To)
		if s.Peer != nil {
			b.WriteString(" peer ")
			writeName(&b, s.Peer)
		}
		if s.Depth != nil {
			b.WriteString(" depth ")
			writeExpr(&b, s.Depth)
		}
	case *OpStmt:
		b.WriteString("op ")
		writeName(&b, s.Name)
		b.WriteString(" = ")
		writeOp(&b, s.Op)
		if len(s.After) > 0 {
			b.WriteString(" after ")
			writeNames(&b, s.After)
		}
	case *DepStmt:
		writeNames(&b, s.Ops)
		b.WriteString(" after ")
		writeNames(&b, s.After)
	case *ExpectStmt:
		if s.Value != nil {
			b.WriteString("expect ")
			writeSlice(&b, s.Slice)
			b.WriteString(" == ")
			writeExpr(&b, s.Value)
			switch {
			case s.OnRank != nil:
				b.WriteString(" on rank ")
				writeExpr(&b, s.OnRank)
			case s.OnLo != nil:
				b.WriteString(" on ranks ")
				writeExpr(&b, s.OnLo)
				b.WriteString(" .. ")
				writeExpr(&b, s.OnHi)
			}
			if s.If != nil {
				b.WriteString(" if ")
				writeExpr(&b, s.If)
			}
			break
		}
		b.WriteString("expect " + s.Kind.Name)
		if s.Op != nil {
			b.WriteString(" " + s.Op.Name)
		}
		if s.Dst != nil {
			b.WriteString(" " + s.Dst.Name)
		}
		writeCounts(&b, s.DstCounts, s.DstDispls)
		if s.Src != nil {
			b.WriteString(" from " + s.Src.Name)
		}
		writeCounts(&b, s.SrcCounts, s.SrcDispls)
		if s.Root != nil {
			b.WriteString(" root ")
			writeExpr(&b, s.Root)
		}
	}
	return b.String()
}

func writeNames(b *strings.Builder, names []*Name) {
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		writeName(b, n)
	}
}

func writeName(b *strings.Builder, n *Name) {
	b.WriteString(n.Ident.Name)
	if len(n.Index) > 0 {
		b.WriteByte('[')
		writeList(b, n.Index)
		b.WriteByte(']')
	}
}

func writeList(b *strings.Builder, list []Expr) {
	for i, x := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		writeExpr(b, x)
	}
}

// writeSlice prints buf, buf[i] or buf[lo:hi]; a range with a compound bound gets spaces
// around its colon (data[sc * n : (sc + 1) * n]), a simple one does not (data[0:4]).
func writeSlice(b *strings.Builder, s *Slice) {
	if f := s.For; f != nil {
		b.WriteByte('{')
		writeSlice(b, f.Slice)
		b.WriteByte(' ')
		writeRange(b, f.Var.Name, f.From, f.To, f.Step)
		if f.Cond != nil {
			b.WriteString(" if ")
			writeExpr(b, f.Cond)
		}
		b.WriteByte('}')
		return
	}
	b.WriteString(s.Buf.Name)
	switch s.Kind {
	case SliceElem:
		b.WriteByte('[')
		writeExpr(b, s.Lo)
		b.WriteByte(']')
	case SliceRange:
		b.WriteByte('[')
		writeExpr(b, s.Lo)
		if isOperand(s.Lo) && isOperand(s.Hi) {
			b.WriteByte(':')
		} else {
			b.WriteString(" : ")
		}
		writeExpr(b, s.Hi)
		b.WriteByte(']')
	}
}

// writeSlices prints a scatter/gather list: its first slice, then the others after commas.
func writeSlices(b *strings.Builder, first *Slice, more []*Slice) {
	writeSlice(b, first)
	for _, s := range more {
		b.WriteString(", ")
		writeSlice(b, s)
	}
}

func writeOp(b *strings.Builder, op Operation) {
	switch op := op.(type) {
	case *SendOp:
		b.WriteString("send ")
		writeName(b, op.Queue)
		if op.Slice != nil {
			b.WriteByte(' ')
			writeSlices(b, op.Slice, op.More)
		}
		if op.Inline {
			b.WriteString(" inline")
		}
	case *RecvOp:
		b.WriteString("recv ")
		writeName(b, op.Queue)
		if op.Slice != nil {
			b.WriteByte(' ')
			writeSlices(b, op.Slice, op.More)
		}
	case *WriteOp:
		b.WriteString("write ")
		writeName(b, op.Queue)
		b.WriteByte(' ')
		writeSlices(b, op.Src, op.More)
		b.WriteString(" to ")
		writeSlice(b, op.Dst)
		if op.Notify {
			b.WriteString(" notify")
		}
	case *ReadOp:
		b.WriteString("read ")
		writeName(b, op.Queue)
		b.WriteByte(' ')
		writeSlice(b, op.Src)
		b.WriteString(" to ")
		writeSlices(b, op.Dst, op.More)
	case *AtomicOp:
		b.WriteString("atomic " + op.Kind.Name + " ")
		writeName(b, op.Queue)
		b.WriteByte(' ')
		writeSlice(b, op.Target)
		b.WriteByte(' ')
		if op.B != nil || op.Kind.Name == "cas" {
			writeUnary(b, op.A)
			b.WriteByte(' ')
			writeUnary(b, op.B)
		} else {
			writeExpr(b, op.A)
		}
		if op.To != nil {
			b.WriteString(" to ")
			writeSlice(b, op.To)
		}
	case *ReduceOp:
		b.WriteString("reduce " + op.Op.Name + " ")
		writeSlices(b, op.Dst, op.DstMore)
		b.WriteString(" from ")
		writeSlices(b, op.Src, op.SrcMore)
	case *CopyOp:
		b.WriteString("copy ")
		writeSlices(b, op.Src, op.SrcMore)
		b.WriteString(" to ")
		writeSlices(b, op.Dst, op.DstMore)
	case *NopOp:
		b.WriteString("nop")
	case *WaitOp:
		b.WriteString("wait ")
		if op.Word != nil {
			writeSlice(b, op.Word)
			b.WriteString(" >= ")
			writeExpr(b, op.Value)
		} else {
			writeUnary(b, op.Count)
			b.WriteString(" writes to ")
			writeSlice(b, op.Region)
		}
	}
}

// isOperand reports whether x prints as one unbroken operand.
func isOperand(x Expr) bool {
	switch x.(type) {
	case *Ident, *IntLit, *FloatLit, *CallExpr, *ParenExpr, *InitExpr, *IndexExpr:
		return true
	}
	return false
}

// exprPrec is the binding strength of x: 6 for ** (and unary), 7 for operands.
func exprPrec(x Expr) int {
	switch x := x.(type) {
	case *BinaryExpr:
		if x.Op == "**" {
			return 6
		}
		return binaryPrec(x.Op)
	case *UnaryExpr:
		return 6
	case *CondExpr:
		return 0 // an operand only in parentheses
	}
	return 7
}

// writeUnary prints a cas operand, which must be a unary expression (a primary, possibly
// signed or raised to a power); anything looser is parenthesised.
func writeUnary(b *strings.Builder, x Expr) {
	writeSub(b, x, exprPrec(x) < 6)
}

func writeSub(b *strings.Builder, x Expr, paren bool) {
	if paren {
		b.WriteByte('(')
		writeExpr(b, x)
		b.WriteByte(')')
		return
	}
	writeExpr(b, x)
}

// writeExpr prints x with single spaces around binary operators. Parentheses are printed as
// written; for hand-built trees, parentheses are added where the structure needs them.
func writeExpr(b *strings.Builder, x Expr) {
	switch x := x.(type) {
	case nil:
		b.WriteString("<nil>")
	case *Ident:
		b.WriteString(x.Name)
	case *IntLit:
		b.WriteString(x.Raw)
	case *FloatLit:
		b.WriteString(x.Raw)
	case *ParenExpr:
		b.WriteByte('(')
		writeExpr(b, x.X)
		b.WriteByte(')')
	case *CondExpr:
		b.WriteString("if ")
		writeExpr(b, x.Cond)
		b.WriteString(" then ")
		writeExpr(b, x.Then)
		b.WriteString(" else ")
		writeExpr(b, x.Else)
	case *CallExpr:
		b.WriteString(x.Fun.Name + "(")
		writeList(b, x.Args)
		b.WriteByte(')')
	case *InitExpr:
		b.WriteString(x.Buf.Name + "[")
		writeExpr(b, x.Index)
		b.WriteString("]@")
		_, prim := x.Rank.(*BinaryExpr)
		_, un := x.Rank.(*UnaryExpr)
		_, cond := x.Rank.(*CondExpr)
		writeSub(b, x.Rank, prim || un || cond) // the rank is a primary
	case *IndexExpr:
		b.WriteString(x.Table.Name + "[")
		writeExpr(b, x.Index)
		b.WriteByte(']')
	case *TableExpr:
		b.WriteByte('[')
		writeList(b, x.Elems)
		if f := x.For; f != nil {
			b.WriteString(" for " + f.Var.Name + " in ")
			writeExpr(b, f.From)
			b.WriteString(" .. ")
			writeExpr(b, f.To)
			if f.Step != nil {
				b.WriteString(" step ")
				writeExpr(b, f.Step)
			}
			if f.Cond != nil {
				b.WriteString(" if ")
				writeExpr(b, f.Cond)
			}
		}
		b.WriteByte(']')
	case *UnaryExpr:
		b.WriteString(x.Op)
		if isUnary(x.X) {
			b.WriteByte(' ') // "- -x", not "--x"
			writeExpr(b, x.X)
			return
		}
		// The operand of a prefix operator is a primary or a power (** binds tighter).
		writeSub(b, x.X, exprPrec(x.X) < 6)
	case *BinaryExpr:
		if x.Op == "**" {
			// Power: the left operand is a primary, the right one a unary expression.
			writeSub(b, x.X, exprPrec(x.X) < 7)
			b.WriteString(" ** ")
			writeSub(b, x.Y, exprPrec(x.Y) < 6)
			return
		}
		prec := binaryPrec(x.Op)
		writeSub(b, x.X, exprPrec(x.X) < prec)
		b.WriteString(" " + x.Op + " ")
		writeSub(b, x.Y, exprPrec(x.Y) <= prec)
	}
}

func isUnary(x Expr) bool { _, ok := x.(*UnaryExpr); return ok }

// FormatExpr prints an expression as the formatter does.
func FormatExpr(x Expr) string {
	var b strings.Builder
	writeExpr(&b, x)
	return b.String()
}

// FormatStmt prints a simple (block-free) statement on one line, as the formatter does.
func FormatStmt(s Stmt) string { return stmtText(s) }

// writeCounts writes a vector expect's `counts C displs D` (either may be absent).
func writeCounts(b *strings.Builder, counts, displs *Ident) {
	if counts != nil {
		b.WriteString(" counts " + counts.Name)
	}
	if displs != nil {
		b.WriteString(" displs " + displs.Name)
	}
}
