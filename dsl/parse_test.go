package dsl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

// sexpr renders an expression fully parenthesised, to test precedence and associativity.
func sexpr(e Expr) string {
	switch e := e.(type) {
	case *Ident:
		return e.Name
	case *IntLit:
		return fmt.Sprint(e.Value)
	case *FloatLit:
		return fmt.Sprint(e.Value)
	case *UnaryExpr:
		return "(" + e.Op + sexpr(e.X) + ")"
	case *BinaryExpr:
		return "(" + sexpr(e.X) + " " + e.Op + " " + sexpr(e.Y) + ")"
	case *ParenExpr:
		return "[" + sexpr(e.X) + "]"
	case *CallExpr:
		var args []string
		for _, a := range e.Args {
			args = append(args, sexpr(a))
		}
		return e.Fun.Name + "(" + strings.Join(args, ", ") + ")"
	}
	return fmt.Sprintf("?%T", e)
}

func parseExpr(t *testing.T, src string) Expr {
	t.Helper()
	f, err := Parse("e.dag", []byte("let x = "+src))
	require.NoError(t, err)
	require.Len(t, f.Stmts, 1)
	return f.Stmts[0].(*LetStmt).Value
}

func TestParseExprPrecedence(t *testing.T) {
	tests := []struct{ src, want string }{
		{"1 + 2 * 3", "(1 + (2 * 3))"},
		{"1 - 2 - 3", "((1 - 2) - 3)"},
		{"2 ** 3 ** 2", "(2 ** (3 ** 2))"},
		{"-2 ** 2", "(-(2 ** 2))"},
		{"2 ** -1", "(2 ** (-1))"},
		{"-a ** -b ** c", "(-(a ** (-(b ** c))))"},
		{"a << 1 + b", "((a << 1) + b)"},
		{"a & b | c ^ d", "(((a & b) | c) ^ d)"},
		{"a == b && c < d || !e", "(((a == b) && (c < d)) || (!e))"},
		{"a || b && c", "(a || (b && c))"},
		{"(rank - 1) % ranks", "([(rank - 1)] % ranks)"},
		{"min(a, b + 1) * log2(x)", "(min(a, (b + 1)) * log2(x))"},
		{"max(1,\n 2)", "max(1, 2)"},
		{"4KiB / 0x10 + 1_000", "((4096 / 16) + 1000)"},
		{"- - 3", "(-(-3))"},
		{"^a % 2", "((^a) % 2)"},
		{"1.5e3 * 0.5", "(1500 * 0.5)"},
		{"1e-3", "0.001"},
		{"2GiB", "2147483648"},
		{"a >= b != c <= d", "(((a >= b) != c) <= d)"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			assert.Equal(t, tt.want, sexpr(parseExpr(t, tt.src)))
		})
	}
}

func TestParseSpans(t *testing.T) {
	src := "plan p # c1\nop tx[s, 2] = write right data[sc * n : (sc + 1) * n] to data notify after a, b[1]\n"
	f, err := Parse("s.dag", []byte(src))
	require.NoError(t, err)
	starts := diag.LineStarts([]byte(src))
	offset := func(p diag.Pos) int { return starts[p.Line-1] + int(p.Col) - 1 }
	text := func(n Node) string { return src[offset(n.Pos()):offset(n.End())] }
	op := f.Stmts[1].(*OpStmt)
	w := op.Op.(*WriteOp)
	assert.Equal(t, "tx[s, 2]", text(op.Name))
	assert.Equal(t, "write right data[sc * n : (sc + 1) * n] to data notify", text(w))
	assert.Equal(t, "data[sc * n : (sc + 1) * n]", text(w.Src))
	assert.Equal(t, SliceRange, w.Src.Kind)
	assert.Equal(t, "(sc + 1) * n", text(w.Src.Hi))
	assert.Equal(t, SliceWhole, w.Dst.Kind)
	assert.True(t, w.Notify)
	assert.Equal(t, "b[1]", text(op.After[1]))
	assert.Equal(t, diag.At("s.dag", 2, 4), op.Name.Pos())
	assert.Equal(t, "op tx[s, 2] = write right data[sc * n : (sc + 1) * n] to data notify after a, b[1]", text(op))
	require.Len(t, f.Comments, 1)
	assert.Equal(t, "# c1", f.Comments[0].Text)
	assert.EqualValues(t, 8, f.Comments[0].Pos().Col)
}

func TestParseColumnsAreBytes(t *testing.T) {
	src := "# héllo wörld\nlet x = 1 # ünïcode\nlet y = $"
	_, err := Parse("u.dag", []byte(src))
	require.Error(t, err)
	list := err.(diag.List)
	require.Len(t, list, 1)
	assert.EqualValues(t, 3, list[0].Pos.Line)
	assert.EqualValues(t, 9, list[0].Pos.Col)
	f, err := Parse("u.dag", []byte("let x = 1 # ünï\nlet y = 2"))
	require.NoError(t, err)
	assert.EqualValues(t, 11, f.Comments[0].Pos().Col)
	assert.EqualValues(t, 18, f.Comments[0].End().Col) // "# ünï" is 7 bytes from column 11
}

func TestParseForms(t *testing.T) {
	src := `plan p; param ranks = 4
buffer b u64[4KiB] remote_read remote_atomic init -1
queue hop[k] to rank ^ (1 << k) peer hop[k] depth 64
op a = send hop[k] data[0:4] inline
op b = recv q
op c = atomic cas q b[0] 1 (x + 1) to old[0]
op d = atomic add q b[1] -1
op e = reduce bxor x from y
op f = copy x[1] to y
op g = nop after a, b
for i in 0..3 step 2 { a, b after c }
if x { } else if y { op h = nop } else { }
`
	f, err := Parse("f.dag", []byte(src))
	require.NoError(t, err)
	require.Len(t, f.Stmts, 13)
	buf := f.Stmts[2].(*BufferStmt)
	assert.Equal(t, "u64", buf.Type.Name)
	assert.Equal(t, int64(4096), buf.Count.(*IntLit).Value)
	assert.Len(t, buf.Access, 2)
	assert.Equal(t, "(-1)", sexpr(buf.Init))
	q := f.Stmts[3].(*QueueStmt)
	assert.Equal(t, "hop", q.Name.Ident.Name)
	assert.Equal(t, "(rank ^ [(1 << k)])", sexpr(q.To))
	assert.Equal(t, "64", sexpr(q.Depth))
	send := f.Stmts[4].(*OpStmt).Op.(*SendOp)
	assert.Equal(t, "hop", send.Queue.Ident.Name)
	assert.Len(t, send.Queue.Index, 1)
	assert.Equal(t, "data", send.Slice.Buf.Name)
	assert.True(t, send.Inline)
	assert.Nil(t, f.Stmts[5].(*OpStmt).Op.(*RecvOp).Slice)
	cas := f.Stmts[6].(*OpStmt).Op.(*AtomicOp)
	assert.Equal(t, "cas", cas.Kind.Name)
	assert.Equal(t, "1", sexpr(cas.A))
	assert.Equal(t, "[(x + 1)]", sexpr(cas.B))
	assert.Equal(t, SliceElem, cas.To.Kind)
	add := f.Stmts[7].(*OpStmt).Op.(*AtomicOp)
	assert.Equal(t, "(-1)", sexpr(add.A))
	assert.Nil(t, add.B)
	assert.Equal(t, "bxor", f.Stmts[8].(*OpStmt).Op.(*ReduceOp).Op.Name)
	assert.Len(t, f.Stmts[10].(*OpStmt).After, 2)
	loop := f.Stmts[11].(*ForStmt)
	assert.Equal(t, "0", sexpr(loop.From))
	assert.Equal(t, "3", sexpr(loop.To))
	assert.Equal(t, "2", sexpr(loop.Step))
	require.Len(t, loop.Body, 1)
	ifs := f.Stmts[12].(*IfStmt)
	assert.True(t, ifs.ElseIf)
	require.Len(t, ifs.Else, 1)
	inner := ifs.Else[0].(*IfStmt)
	assert.NotNil(t, inner.Else)
	assert.Empty(t, inner.Else)
}

// TestCasOperandsAfterRank: rank and ranks are never functions, so in `atomic cas Q S rank (x)`
// the parenthesised expression is the swap operand, not an argument list.
func TestCasOperandsAfterRank(t *testing.T) {
	f, err := Parse("t.dag", []byte("plan p\nop a = atomic cas q x[0] rank (rank + 1) to y[0]\nop b = atomic cas q x[0] ranks (1)\n"))
	require.NoError(t, err)
	a := f.Stmts[1].(*OpStmt).Op.(*AtomicOp)
	assert.Equal(t, "rank", a.A.(*Ident).Name)
	assert.IsType(t, &ParenExpr{}, a.B)
	require.NotNil(t, a.To)
	b := f.Stmts[2].(*OpStmt).Op.(*AtomicOp)
	assert.Equal(t, "ranks", b.A.(*Ident).Name)
	assert.IsType(t, &ParenExpr{}, b.B)
}

// TestParseExtern: extern follows the count and marks the buffer as the caller's; the words after
// it are parsed as before.
func TestParseExtern(t *testing.T) {
	f, err := Parse("x.dag", []byte("plan p\nparam count = 8\nbuffer d f32[count] extern remote_write init rank\nbuffer t f32[count]\n"))
	require.NoError(t, err)
	d := f.Stmts[2].(*BufferStmt)
	assert.True(t, d.Extern)
	require.Len(t, d.Access, 1)
	assert.Equal(t, "remote_write", d.Access[0].Name)
	assert.Equal(t, "rank", sexpr(d.Init))
	assert.False(t, f.Stmts[3].(*BufferStmt).Extern)
	_, err = Parse("x.dag", []byte("plan p\nlet extern = 1\n")) // a soft keyword: a name here
	require.NoError(t, err)
	_, err = Parse("x.dag", []byte("plan p\nlet after = 1\n"))
	require.ErrorContains(t, err, `"after" is a reserved keyword`)
}

// TestSoftKeywords: the keywords that only start a clause are names everywhere else, and the
// clauses they start read as before, even next to names spelt like them.
func TestSoftKeywords(t *testing.T) {
	src := `plan p
param ranks = 4
param depth = 16
let step = 2
let peer = (rank + 1) % ranks
def from(init) = init + 1
buffer extern u32[8] remote_write init from(i)
buffer notify u32[8]
queue q to peer peer p depth depth
queue p to (rank - 1) % ranks peer q depth max(depth, 1)
for i in 0 .. 8 step step {
  op tx[i] = write q extern[i : i + step] to extern[i : i + step] notify
}
op r = reduce sum notify from extern
expect allreduce sum extern from notify
`
	f, err := Parse("x.dag", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, "depth", f.Stmts[2].(*ParamStmt).Name.Name)
	q := f.Stmts[8].(*QueueStmt)
	assert.Equal(t, "peer", sexpr(q.To))
	assert.Equal(t, "p", q.Peer.Ident.Name)
	assert.Equal(t, "depth", sexpr(q.Depth))
	loop := f.Stmts[10].(*ForStmt)
	assert.Equal(t, "step", sexpr(loop.Step))
	w := loop.Body[0].(*OpStmt).Op.(*WriteOp)
	assert.Equal(t, "extern", w.Src.Buf.Name)
	assert.True(t, w.Notify)
	r := f.Stmts[11].(*OpStmt).Op.(*ReduceOp)
	assert.Equal(t, "notify", r.Dst.Buf.Name)
	assert.Equal(t, "extern", r.Src.Buf.Name)
	for _, k := range SoftKeywords() {
		assert.True(t, IsKeyword(k), k)
		_, err := Parse("x.dag", []byte("plan p\nlet "+k+" = 1\nlet x = "+k+" + 1\n"))
		assert.NoError(t, err, k)
	}
}

func TestParseExpect(t *testing.T) {
	src := "plan p\nbuffer d u8[4]\nbuffer s u8[4]\nexpect reduce sum d from s root 1 + 1\nexpect unchanged s\n"
	f, err := Parse("e.dag", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := f.Stmts[3].(*ExpectStmt)
	if !ok {
		t.Fatalf("statement 4 is %T, want *ExpectStmt", f.Stmts[3])
	}
	if e.Kind.Name != "reduce" || e.Op == nil || e.Op.Name != "sum" || e.Dst.Name != "d" || e.Src == nil || e.Src.Name != "s" || e.Root == nil {
		t.Fatalf("expect parsed as %+v", e)
	}
	if e.Pos().Line != 4 || e.Pos().Col != 1 || e.Kind.Pos().Col != 8 {
		t.Fatalf("expect at %v, kind at %v", e.Pos(), e.Kind.Pos())
	}
	u := f.Stmts[4].(*ExpectStmt)
	if u.Kind.Name != "unchanged" || u.Op != nil || u.Src != nil || u.Root != nil || u.Dst.Name != "s" {
		t.Fatalf("unchanged parsed as %+v", u)
	}
}

func TestParseExprLanguage(t *testing.T) {
	src := "def f(a, b) = if a < b then a else f(b, a)\nvar v = 1\nv <<= 2\nassert v == 4, \"v is \\\"4\\\"\"\nlet c = 1 + (if v then 2 else 3)\n"
	f, err := Parse("e.dag", []byte(src))
	require.NoError(t, err)
	require.Len(t, f.Stmts, 5)
	d := f.Stmts[0].(*DefStmt)
	assert.Equal(t, "f", d.Name.Name)
	assert.Len(t, d.Params, 2)
	c := d.Body.(*CondExpr)
	assert.Equal(t, "(a < b)", sexpr(c.Cond))
	a := f.Stmts[2].(*AssignStmt)
	assert.Equal(t, "<<=", a.Op)
	assert.Equal(t, diag.At("e.dag", 3, 3), a.OpPos)
	as := f.Stmts[3].(*AssertStmt)
	assert.Equal(t, `v is "4"`, as.Msg.Value)
	assert.Equal(t, diag.At("e.dag", 4, 16), as.Msg.Pos())

	for _, tc := range []struct{ src, want string }{
		{"assert 1, \"no end\n", `e.dag:1:11: unterminated string: close it with " on the same line`},
		{"let x = 1 + if 1 then 2 else 3\n", "parenthesise it"},
		{"let x = if 1 then 2\n", `expected "else"`},
	} {
		_, err := Parse("e.dag", []byte(tc.src))
		if assert.Error(t, err, tc.src) {
			assert.Contains(t, err.Error(), tc.want, tc.src)
		}
	}
}
