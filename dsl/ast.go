package dsl

import "github.com/coredag/coredag/diag"

// The AST of a .dag file. Every node knows where it starts (Pos) and where it ends (End: the
// position just past its last byte), so diagnostics can point at any part of a statement.

// Node is any AST node.
type Node interface {
	Pos() diag.Pos
	End() diag.Pos
}

// Span is embedded in every node and records its extent.
type Span struct {
	From, To diag.Pos
}

// Pos is where the node starts.
func (s Span) Pos() diag.Pos { return s.From }

// End is the position just past the node.
func (s Span) End() diag.Pos { return s.To }

// File is a parsed .dag file.
type File struct {
	Span
	Name     string
	Stmts    []Stmt
	Comments []*Comment // every comment of the file, in source order (the formatter places them)
}

// Comment is a `#` comment, Text including the `#`.
type Comment struct {
	Span
	Text string
}

// Stmt is a statement.
type Stmt interface {
	Node
	stmtNode()
}

// PlanStmt is `plan NAME`.
type PlanStmt struct {
	Span
	Name *Ident
}

// ParamStmt is `param NAME = EXPR`.
type ParamStmt struct {
	Span
	Name  *Ident
	Value Expr
}

// LetStmt is `let NAME = EXPR`.
type LetStmt struct {
	Span
	Name  *Ident
	Value Expr
}

// BufferStmt is `buffer NAME TYPE[COUNT] [extern] [ACCESS...] [init EXPR]`.
type BufferStmt struct {
	Span
	Name   *Ident
	Type   *Ident   // u8 i32 u32 i64 u64 f32 f64
	Count  Expr     // elements
	Extern bool     // the caller supplies the memory; Init then only fills it for coredag's own runs
	Access []*Ident // remote_read remote_write remote_atomic, as written
	Init   Expr     // nil when absent
}

// QueueStmt is `queue NAME[IDX...] to EXPR [peer NAME[IDX...]] [depth EXPR]`.
type QueueStmt struct {
	Span
	Name  *Name
	To    Expr
	Peer  *Name // nil when absent
	Depth Expr  // nil when absent
}

// OpStmt is `op NAME[IDX...] = OPERATION [after REF, REF...]`.
type OpStmt struct {
	Span
	Name  *Name
	Op    Operation
	After []*Name
}

// DepStmt is `REF, REF... after REF, REF...`.
type DepStmt struct {
	Span
	Ops   []*Name
	After []*Name
}

// ForStmt is `for VAR in FROM .. TO [step STEP] { BODY }` (half-open range).
type ForStmt struct {
	Span
	Var      *Ident
	From, To Expr
	Step     Expr // nil when absent
	Body     []Stmt

	Lbrace, Rbrace diag.Pos // the braces around Body (kept for comment placement by the formatter)
}

// IfStmt is `if COND { THEN } [else { ELSE }]`; `else if` is an IfStmt as the only Else statement
// with ElseIf set.
type IfStmt struct {
	Span
	Cond   Expr
	Then   []Stmt
	Else   []Stmt // nil when absent
	ElseIf bool   // Else holds exactly one *IfStmt written as `else if`

	Lbrace, Rbrace         diag.Pos // the braces around Then
	ElseLbrace, ElseRbrace diag.Pos // the braces around Else; zero when absent or for else if
}

// ExpectStmt is a postcondition: what the plan computes into one buffer, as a collective.
//
//	expect allreduce OP DST [from SRC]
//	expect reduce OP DST [from SRC] root R
//	expect broadcast DST [from SRC] root R
//	expect allgather DST [from SRC]
//	expect reduce_scatter OP DST [from SRC]
//	expect alltoall DST from SRC
//	expect gather DST [from SRC] root R
//	expect scatter DST from SRC root R
//	expect allgatherv DST counts C [displs D] [from SRC]
//	expect gatherv DST counts C [displs D] [from SRC] root R
//	expect scatterv DST from SRC counts C [displs D] root R
//	expect alltoallv DST counts C [displs D] from SRC counts C [displs D]
//	expect reduce_scatter OP DST counts C [from SRC]
//	expect unchanged BUF
//	expect barrier
//	expect SLICE == VALUE [on rank R | on ranks LO .. HI] [if PRECONDITION]
//
// Kind is the collective's name as written (elaboration checks it), Op the reduction operator
// (nil when absent), Dst and Src buffer names (Src nil when absent), Root the root's expression
// (nil when absent). DstCounts and DstDispls (SrcCounts, SrcDispls) are the names of the tables
// after DST (after SRC), nil when absent. A front end that emits plans builds one from these
// fields alone.
type ExpectStmt struct {
	Span
	Kind *Ident // nil for the general form
	Op   *Ident // sum prod min max band bor bxor, or nil
	Dst  *Ident // nil for `expect barrier` (and for the general form)
	Src  *Ident // nil: the default source of Kind (docs/language.md)
	Root Expr   // nil when absent

	DstCounts, DstDispls *Ident // `counts C displs D` after DST: tables, or nil
	SrcCounts, SrcDispls *Ident // the same after SRC

	// The general form, `expect SLICE == VALUE [on rank OnRank | on ranks OnLo .. OnHi] [if
	// If]`: Slice and Value are set (Kind, Op, Dst, Src and Root are not), at most one of OnRank
	// and the pair OnLo, OnHi (nil: every rank), and If when the statement has a precondition.
	Slice      *Slice
	Value      Expr
	OnRank     Expr
	OnLo, OnHi Expr
	If         Expr
}

// VarStmt is `var NAME = EXPR`: a per-rank variable, which assignments may change.
type VarStmt struct {
	Span
	Name  *Ident
	Value Expr
}

// AssignStmt is `NAME = EXPR` or `NAME op= EXPR` (op one of + - * / % << >> & | ^), on a name
// declared with var.
type AssignStmt struct {
	Span
	Name  *Ident
	Op    string // "=", "+=", "-=", ...
	OpPos diag.Pos
	Value Expr
}

// AssertStmt is `assert COND [, "message"]`.
type AssertStmt struct {
	Span
	Cond Expr
	Msg  *StringLit // nil when absent
}

// StringLit is a double-quoted string (only the message of an assert).
type StringLit struct {
	Span
	Raw   string // as written, with the quotes
	Value string
}

// DefStmt is `def NAME(PARAM, ...) = EXPR`: a pure integer function.
type DefStmt struct {
	Span
	Name   *Ident
	Params []*Ident
	Body   Expr
}

func (*VarStmt) stmtNode()    {}
func (*AssignStmt) stmtNode() {}
func (*AssertStmt) stmtNode() {}
func (*DefStmt) stmtNode()    {}
func (*PlanStmt) stmtNode()   {}
func (*ExpectStmt) stmtNode() {}
func (*ParamStmt) stmtNode()  {}
func (*LetStmt) stmtNode()    {}
func (*BufferStmt) stmtNode() {}
func (*QueueStmt) stmtNode()  {}
func (*OpStmt) stmtNode()     {}
func (*DepStmt) stmtNode()    {}
func (*ForStmt) stmtNode()    {}
func (*IfStmt) stmtNode()     {}

// Name is a possibly indexed name: `tx`, `tx[s]`, `hop[k, j]`.
type Name struct {
	Span
	Ident *Ident
	Index []Expr // nil for a plain name
}

// SliceKind says how a slice was written.
type SliceKind uint8

// Slice forms.
const (
	SliceWhole SliceKind = iota // buf
	SliceElem                   // buf[i]
	SliceRange                  // buf[lo:hi]
)

// Slice is `buf`, `buf[i]` or `buf[lo:hi]`, or, where a scatter/gather list may stand, a list
// of slices built by a loop (For set; Kind, Buf, Lo and Hi unset).
type Slice struct {
	Span
	Kind SliceKind
	Buf  *Ident
	Lo   Expr // the index for SliceElem, the low bound for SliceRange
	Hi   Expr // SliceRange only
	For  *SliceFor
}

// SliceFor is `{SLICE for VAR in FROM .. TO [step STEP] [if COND]}`: SLICE for each value of
// VAR in the half-open range (as a for statement counts), those for which COND holds, in order.
type SliceFor struct {
	Slice    *Slice
	Var      *Ident
	From, To Expr
	Step     Expr // nil when absent
	Cond     Expr // nil when absent
}

// Operation is the right-hand side of an op statement.
type Operation interface {
	Node
	opNode()
}

// SendOp is `send Q [SLICE, SLICE...] [inline]`: several slices are a gather list, sent as one
// message (their bytes in list order).
type SendOp struct {
	Span
	Queue  *Name
	Slice  *Slice   // nil: zero-length message
	More   []*Slice // the gather list's slices after Slice (nil for one slice)
	Inline bool
}

// RecvOp is `recv Q [SLICE, SLICE...]`: several slices are a scatter list, filled in list order.
type RecvOp struct {
	Span
	Queue *Name
	Slice *Slice   // nil: for notify writes
	More  []*Slice // the scatter list's slices after Slice
}

// WriteOp is `write Q SLICE, SLICE... to SLICE [notify]`: a local gather list into one remote slice.
type WriteOp struct {
	Span
	Queue    *Name
	Src, Dst *Slice
	More     []*Slice // the gather list's slices after Src
	Notify   bool
}

// ReadOp is `read Q SLICE to SLICE, SLICE...` (Src on the peer, Dst local): one remote slice into a
// local scatter list.
type ReadOp struct {
	Span
	Queue    *Name
	Src, Dst *Slice
	More     []*Slice // the scatter list's slices after Dst
}

// AtomicOp is `atomic add Q SLICE EXPR [to SLICE]` or `atomic cas Q SLICE EXPR EXPR [to SLICE]`.
type AtomicOp struct {
	Span
	Kind   *Ident // add or cas
	Queue  *Name
	Target *Slice
	A      Expr   // add: addend; cas: compare
	B      Expr   // cas: swap; nil for add
	To     *Slice // nil when absent
}

// ReduceOp is `reduce OP SLICE from SLICE`, or with lists of blocks on both sides, `reduce OP
// LIST from LIST`, which pairs the blocks in order (Dst with Src, then DstMore with SrcMore).
type ReduceOp struct {
	Span
	Op               *Ident // sum prod min max band bor bxor
	Dst, Src         *Slice
	DstMore, SrcMore []*Slice // the lists' blocks after Dst and Src (nil for one slice)
}

// CopyOp is `copy SLICE to SLICE`, or `copy LIST to LIST`, pairing the blocks as ReduceOp does.
type CopyOp struct {
	Span
	Src, Dst         *Slice
	SrcMore, DstMore []*Slice
}

// Listed reports whether a reduce or copy has a list on either side (several slices, or a
// {... for ...}): it then pairs blocks rather than two slices.
func Listed(first *Slice, more []*Slice) bool {
	return len(more) > 0 || first != nil && first.For != nil
}

// NopOp is `nop`.
type NopOp struct {
	Span
}

// WaitOp is `wait WORD >= VALUE` (Word and Value set: the 8-byte word reaches Value) or `wait
// COUNT writes to REGION` (Count and Region set: COUNT writes have landed in the region).
type WaitOp struct {
	Span
	Word   *Slice
	Value  Expr
	Count  Expr
	Region *Slice
}

func (*WaitOp) opNode()   {}
func (*SendOp) opNode()   {}
func (*RecvOp) opNode()   {}
func (*WriteOp) opNode()  {}
func (*ReadOp) opNode()   {}
func (*AtomicOp) opNode() {}
func (*ReduceOp) opNode() {}
func (*CopyOp) opNode()   {}
func (*NopOp) opNode()    {}

// Expr is an expression.
type Expr interface {
	Node
	exprNode()
}

// Ident is a name (also `rank`, `ranks` and type or operator keywords where the grammar takes one).
type Ident struct {
	Span
	Name string
}

// IntLit is an integer literal, possibly with a byte unit; Value includes the unit.
type IntLit struct {
	Span
	Raw   string // as written: "42", "0x2a", "1_000", "4KiB"
	Value int64
}

// FloatLit is a float literal (only meaningful in init of float buffers).
type FloatLit struct {
	Span
	Raw   string
	Value float64
}

// UnaryExpr is `-X`, `!X` (also `+X` and `^X`, Go's bitwise complement, if the grammar takes them).
type UnaryExpr struct {
	Span
	Op string
	X  Expr
}

// BinaryExpr is `X op Y` for the operators of docs/language.md §7 (Expressions), Op as written
// ("**", "<<", "&&").
type BinaryExpr struct {
	Span
	Op    string
	OpPos diag.Pos
	X, Y  Expr
}

// CallExpr is `min(a, b)`, `max(a, b)` or `log2(x)`.
type CallExpr struct {
	Span
	Fun  *Ident
	Args []Expr
}

// ParenExpr is `(X)`; kept so the formatter can reproduce the user's grouping.
type ParenExpr struct {
	Span
	X Expr
}

// CondExpr is `if COND then A else B`: only the branch COND selects is evaluated.
type CondExpr struct {
	Span
	Cond, Then, Else Expr
}

// InitExpr is `BUF[INDEX]@RANK`: element INDEX of buffer BUF as it was on rank RANK before the
// plan ran. Only the value of an expect may use it.
type InitExpr struct {
	Span
	Buf   *Ident
	Index Expr
	Rank  Expr // a primary: a name, a number, rank, or an expression in parentheses
}

// TableExpr is an immutable integer table, the value of a let: `[A, B, ...]` (Elems), or
// `[ELEM for VAR in FROM .. TO [step STEP] [if COND]]` (For set, Elems holding ELEM alone): ELEM
// for each value of VAR in the half-open range, those for which COND holds, in order.
type TableExpr struct {
	Span
	Elems []Expr
	For   *TableFor
}

// TableFor is the loop of a table built by a loop.
type TableFor struct {
	Var      *Ident
	From, To Expr
	Step     Expr // nil when absent
	Cond     Expr // nil when absent
}

// IndexExpr is `NAME[INDEX]`: an element of a table, counted from 0.
type IndexExpr struct {
	Span
	Table *Ident
	Index Expr
}

func (*TableExpr) exprNode()  {}
func (*IndexExpr) exprNode()  {}
func (*CondExpr) exprNode()   {}
func (*InitExpr) exprNode()   {}
func (*Ident) exprNode()      {}
func (*IntLit) exprNode()     {}
func (*FloatLit) exprNode()   {}
func (*UnaryExpr) exprNode()  {}
func (*BinaryExpr) exprNode() {}
func (*CallExpr) exprNode()   {}
func (*ParenExpr) exprNode()  {}
