package dsl

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// The participle grammar. Its structs mirror docs/language.md (§4 Statements, §7 Expressions)
// closely and are converted into the public AST by convert.go; every struct records the tokens
// it matched, which gives exact spans.
// Expressions are parsed flat (operands and operators) and then arranged by precedence climbing,
// which keeps the grammar small and the parser free of deep recursion on long operator chains.

type gFile struct {
	Stmts []*gStmt `parser:"( @@ ( Sep @@ )* )?"`
}

type gStmt struct { // alternatives ordered by how often they occur, which saves backtracking
	Op     *gOp     `parser:"  @@"`
	Assign *gAssign `parser:"| @@"` // before Dep: both start with a name, Assign fails at its second token
	Dep    *gDep    `parser:"| @@"`
	Let    *gLet    `parser:"| @@"`
	If     *gIf     `parser:"| @@"`
	For    *gFor    `parser:"| @@"`
	Buffer *gBuffer `parser:"| @@"`
	Queue  *gQueue  `parser:"| @@"`
	Param  *gParam  `parser:"| @@"`
	Plan   *gPlan   `parser:"| @@"`
	Expect *gExpect `parser:"| @@"`
	Var    *gVar    `parser:"| @@"`
	Assert *gAssert `parser:"| @@"`
	Def    *gDef    `parser:"| @@"`
}

// gIdent is a name. The soft keywords (softKeywords) are names too: each only starts a clause
// at a place where no name can stand, so `param depth` and `let step = 2` are unambiguous.
type gIdent struct {
	Pos  lexer.Position
	Name string `parser:"@(Ident | 'step' | 'peer' | 'depth' | 'init' | 'from' | 'notify' | 'extern' | 'remote_read' | 'remote_write' | 'remote_atomic')"`
}

type gPlan struct {
	Tokens []lexer.Token
	Name   *gIdent `parser:"'plan' @@"`
}

// gParamName is a param's name: `ranks` is a keyword but `param ranks = N` sets the world size.
type gParamName struct {
	Pos  lexer.Position
	Name string `parser:"@(Ident | 'ranks' | 'step' | 'peer' | 'depth' | 'init' | 'from' | 'notify' | 'extern' | 'remote_read' | 'remote_write' | 'remote_atomic')"`
}

type gParam struct {
	Tokens []lexer.Token
	Name   *gParamName `parser:"'param' @@"`
	Value  *gExpr      `parser:"'=' @@"`
}

type gLet struct {
	Tokens []lexer.Token
	Name   *gIdent `parser:"'let' @@"`
	Table  *gTable `parser:"'=' ( @@"`
	Value  *gExpr  `parser:"| @@ )"`
}

// gTable is an immutable integer table: `[EXPR, ...]`, or `[EXPR for VAR in FROM .. TO [step S]
// [if COND]]` built by a loop; only a let binds one.
type gTable struct {
	Tokens []lexer.Token
	Elems  []*gExpr   `parser:"'[' ( @@ ( ',' @@ )* )?"`
	For    *gTableFor `parser:"@@? ']'"`
}

type gTableFor struct {
	Pos  lexer.Position
	Var  *gIdent `parser:"'for' @@"`
	From *gExpr  `parser:"'in' @@"`
	To   *gExpr  `parser:"'..' @@"`
	Step *gExpr  `parser:"( 'step' @@ )?"`
	Cond *gExpr  `parser:"( 'if' @@ )?"`
}

// gVar is `var NAME = EXPR`: a per-rank variable that later assignments may change.
type gVar struct {
	Tokens []lexer.Token
	Name   *gIdent `parser:"'var' @@"`
	Value  *gExpr  `parser:"'=' @@"`
}

// gAssign is `NAME = EXPR` or `NAME op= EXPR` on a variable declared with var.
type gAssign struct {
	Tokens []lexer.Token
	Name   *gIdent    `parser:"@@"`
	Op     *gAssignOp `parser:"@@"`
	Value  *gExpr     `parser:"@@"`
}

type gAssignOp struct {
	Pos lexer.Position
	Op  string `parser:"@('=' | '+=' | '-=' | '*=' | '/=' | '%=' | '<<=' | '>>=' | '&=' | '|=' | '^=')"`
}

// gAssert is `assert COND [, "message"]`.
type gAssert struct {
	Tokens []lexer.Token
	Cond   *gExpr   `parser:"'assert' @@"`
	Msg    *gString `parser:"( ',' @@ )?"`
}

type gString struct {
	Pos   lexer.Position
	Value string `parser:"@String"`
}

// gDef is `def NAME(PARAM, ...) = EXPR`: a pure integer function.
type gDef struct {
	Tokens []lexer.Token
	Name   *gIdent   `parser:"'def' @@"`
	Params []*gIdent `parser:"'(' ( @@ ( ',' @@ )* )? ')'"`
	Body   *gExpr    `parser:"'=' @@"`
}

type gType struct {
	Pos  lexer.Position
	Name string `parser:"@('u8' | 'i32' | 'u32' | 'i64' | 'u64' | 'f32' | 'f64')"`
}

type gAccess struct {
	Pos  lexer.Position
	Name string `parser:"@('remote_read' | 'remote_write' | 'remote_atomic')"`
}

type gBuffer struct {
	Tokens []lexer.Token
	Name   *gIdent    `parser:"'buffer' @@"`
	Type   *gType     `parser:"@@"`
	Count  *gExpr     `parser:"'[' @@ ']'"`
	Extern bool       `parser:"@'extern'?"`
	Access []*gAccess `parser:"@@*"`
	Init   *gExpr     `parser:"( 'init' @@ )?"`
}

type gName struct {
	Tokens []lexer.Token
	Ident  *gIdent  `parser:"@@"`
	Index  []*gExpr `parser:"( '[' @@ ( ',' @@ )* ']' )?"`
}

type gQueue struct {
	Tokens []lexer.Token
	Name   *gName `parser:"'queue' @@"`
	To     *gExpr `parser:"'to' @@"`
	Peer   *gName `parser:"( 'peer' @@ )?"`
	Depth  *gExpr `parser:"( 'depth' @@ )?"`
}

type gOp struct {
	Tokens []lexer.Token
	Name   *gName      `parser:"'op' @@"`
	Op     *gOperation `parser:"'=' @@"`
	After  []*gName    `parser:"( 'after' @@ ( ',' @@ )* )?"`
}

type gDep struct {
	Tokens []lexer.Token
	Ops    []*gName `parser:"@@ ( ',' @@ )*"`
	After  []*gName `parser:"'after' @@ ( ',' @@ )*"`
}

type gBlock struct {
	Tokens []lexer.Token
	Stmts  []*gStmt `parser:"'{' ( @@ ( Sep @@ )* )? '}'"`
}

type gFor struct {
	Tokens []lexer.Token
	Var    *gIdent `parser:"'for' @@"`
	From   *gExpr  `parser:"'in' @@"`
	To     *gExpr  `parser:"'..' @@"`
	Step   *gExpr  `parser:"( 'step' @@ )?"`
	Body   *gBlock `parser:"@@"`
}

type gIf struct {
	Tokens []lexer.Token
	Cond   *gExpr  `parser:"'if' @@"`
	Then   *gBlock `parser:"@@"`
	ElseIf *gIf    `parser:"( 'else' ( @@"`
	Else   *gBlock `parser:"| @@ ) )?"`
}

type gSlice struct {
	Tokens []lexer.Token
	For    *gSliceFor `parser:"  @@"`
	Buf    *gIdent    `parser:"| @@"`
	Open   bool       `parser:"( @'['"`
	Lo     *gExpr     `parser:"@@"`
	Colon  bool       `parser:"( @':'"`
	Hi     *gExpr     `parser:"@@ )? ']' )?"`
}

// gSliceFor is a list of slices built by a loop: {SLICE for VAR in FROM .. TO [step S] [if COND]}
// (braces, not brackets: `send q [` would read as an index of the queue's name).
type gSliceFor struct {
	Tokens []lexer.Token
	Slice  *gSlice `parser:"'{' @@"`
	Var    *gIdent `parser:"'for' @@"`
	From   *gExpr  `parser:"'in' @@"`
	To     *gExpr  `parser:"'..' @@"`
	Step   *gExpr  `parser:"( 'step' @@ )?"`
	Cond   *gExpr  `parser:"( 'if' @@ )? '}'"`
}

type gOperation struct {
	Send   *gSend   `parser:"  @@"`
	Recv   *gRecv   `parser:"| @@"`
	Write  *gWrite  `parser:"| @@"`
	Read   *gRead   `parser:"| @@"`
	Atomic *gAtomic `parser:"| @@"`
	Reduce *gReduce `parser:"| @@"`
	Copy   *gCopy   `parser:"| @@"`
	Nop    *gNop    `parser:"| @@"`
	Wait   *gWait   `parser:"| @@"`
}

type gSend struct {
	Tokens []lexer.Token
	Queue  *gName    `parser:"'send' @@"`
	Slice  *gSlice   `parser:"( @@"`
	More   []*gSlice `parser:"( ',' @@ )* )?"`
	Inline bool      `parser:"@'inline'?"`
}

type gRecv struct {
	Tokens []lexer.Token
	Queue  *gName    `parser:"'recv' @@"`
	Slice  *gSlice   `parser:"( @@"`
	More   []*gSlice `parser:"( ',' @@ )* )?"`
}

type gWrite struct {
	Tokens []lexer.Token
	Queue  *gName    `parser:"'write' @@"`
	Src    *gSlice   `parser:"@@"`
	More   []*gSlice `parser:"( ',' @@ )*"`
	Dst    *gSlice   `parser:"'to' @@"`
	Notify bool      `parser:"@'notify'?"`
}

type gRead struct {
	Tokens []lexer.Token
	Queue  *gName    `parser:"'read' @@"`
	Src    *gSlice   `parser:"@@"`
	Dst    *gSlice   `parser:"'to' @@"`
	More   []*gSlice `parser:"( ',' @@ )*"`
}

type gAtomic struct {
	Tokens []lexer.Token
	Add    *gAtomicAdd `parser:"'atomic' ( @@"`
	Cas    *gAtomicCas `parser:"| @@ )"`
	To     *gSlice     `parser:"( 'to' @@ )?"`
}

type gAtomicAdd struct {
	Pos    lexer.Position
	Queue  *gName  `parser:"'add' @@"`
	Target *gSlice `parser:"@@"`
	A      *gExpr  `parser:"@@"`
}

type gAtomicCas struct {
	Pos    lexer.Position
	Queue  *gName  `parser:"'cas' @@"`
	Target *gSlice `parser:"@@"`
	A      *gUnary `parser:"@@"`
	B      *gUnary `parser:"@@"`
}

type gReduceOp struct {
	Pos  lexer.Position
	Name string `parser:"@('sum' | 'prod' | 'min' | 'max' | 'band' | 'bor' | 'bxor')"`
}

type gReduce struct {
	Tokens  []lexer.Token
	Op      *gReduceOp `parser:"'reduce' @@"`
	Dst     *gSlice    `parser:"@@"`
	DstMore []*gSlice  `parser:"( ',' @@ )*"`
	Src     *gSlice    `parser:"'from' @@"`
	SrcMore []*gSlice  `parser:"( ',' @@ )*"`
}

type gCopy struct {
	Tokens  []lexer.Token
	Src     *gSlice   `parser:"'copy' @@"`
	SrcMore []*gSlice `parser:"( ',' @@ )*"`
	Dst     *gSlice   `parser:"'to' @@"`
	DstMore []*gSlice `parser:"( ',' @@ )*"`
}

// gExpectKind is the collective an expect statement names; `reduce` is a keyword, the others are
// names checked by elaboration, so no new reserved word is needed for them.
type gExpectKind struct {
	Pos  lexer.Position
	Name string `parser:"@(Ident | 'reduce')"`
}

// gExpect is a postcondition: the general form (gExpectValue), or a collective by name (the
// buffer is optional in the grammar: `expect barrier` has none, and elaboration says which
// forms need one).
type gExpect struct {
	Tokens []lexer.Token
	Value  *gExpectValue `parser:"'expect' ( @@"`
	Kind   *gExpectKind  `parser:"| @@"`
	Op     *gReduceOp    `parser:"@@?"`
	Dst    *gIdent       `parser:"@@?"`
	DstV   *gCounts      `parser:"@@?"`
	Src    *gIdent       `parser:"( 'from' @@"`
	SrcV   *gCounts      `parser:"@@? )?"`
	Root   *gExpr        `parser:"( 'root' @@ )? )"`
}

// gCounts is the counts and displacements of a vector expect's buffer, `counts T [displs T]`:
// names of tables (words, not keywords).
type gCounts struct {
	Counts *gIdent `parser:"'counts' @@"`
	Displs *gIdent `parser:"( 'displs' @@ )?"`
}

// gExpectValue is the general form, `BUF[SLICE] == EXPR [on rank R | on ranks LO .. HI] [if
// PRECONDITION]`; it
// fails at its second token on a collective's name, which leaves the collective's branch.
type gExpectValue struct {
	Dst   *gSlice `parser:"@@ '=='"`
	Value *gExpr  `parser:"@@"`
	On    *gOn    `parser:"@@?"`
	If    *gExpr  `parser:"( 'if' @@ )?"`
}

// gOn is the ranks a general expect is about: `on rank R` or `on ranks LO .. HI` (half-open).
type gOn struct {
	Tokens []lexer.Token
	Rank   *gExpr `parser:"'on' ( 'rank' @@"`
	Lo     *gExpr `parser:"| 'ranks' @@"`
	Hi     *gExpr `parser:"'..' @@ )"`
}

// gWait is `wait WORD >= VALUE` (a memory word reaches a value) or `wait COUNT writes to
// SLICE` (COUNT writes have landed in a region). `wait` and `writes` are not keywords: they are
// matched by their text where only an operation can stand, so they stay free as names. The
// word form comes first: a slice fails at once on a count that is not a name, and a count that
// is a name fails the word form at its second token, within the parser's lookahead.
type gWait struct {
	Tokens []lexer.Token
	Word   *gSlice `parser:"'wait' ( @@ '>='"`
	Value  *gExpr  `parser:"@@"`
	Count  *gUnary `parser:"| @@ 'writes'"`
	Region *gSlice `parser:"'to' @@ )"`
}

type gNop struct {
	Tokens []lexer.Token
	Nop    bool `parser:"@'nop'"`
}

// gExpr is a conditional expression, or a flat sequence of unary operands and binary operators.
// A conditional is a whole expression: as an operand it must be parenthesised, so that no
// operator after it can be read as part of its else branch.
type gExpr struct {
	Tokens []lexer.Token
	Cond   *gCond     `parser:"( @@"`
	First  *gUnary    `parser:"| @@"`
	Rest   []*gBinary `parser:"@@* )"`
}

// gCond is `if C then A else B`.
type gCond struct {
	Cond *gExpr `parser:"'if' @@"`
	Then *gExpr `parser:"'then' @@"`
	Else *gExpr `parser:"'else' @@"`
}

type gBinary struct {
	Pos lexer.Position
	Op  string  `parser:"@('||' | '&&' | '==' | '!=' | '<=' | '>=' | '<' | '>' | '<<' | '>>' | '+' | '-' | '|' | '^' | '*' | '/' | '%' | '&')"`
	Y   *gUnary `parser:"@@"`
}

// gUnary is prefix operators applied to a power chain; `parser:"**"` binds tighter than the prefix
// operators and is right-associative: -a ** -b ** c is -(a ** (-(b ** c))).
type gUnary struct {
	Tokens []lexer.Token
	Ops    []*gPrefix `parser:"@@*"`
	X      *gPrimary  `parser:"@@"`
	Pow    *gPow      `parser:"@@?"`
}

type gPrefix struct {
	Pos lexer.Position
	Op  string `parser:"@('-' | '!' | '+' | '^')"`
}

type gPow struct {
	Pos lexer.Position
	Y   *gUnary `parser:"'**' @@"`
}

type gPrimary struct {
	Tokens []lexer.Token
	Named  *gNamed `parser:"  @@"`
	World  *string `parser:"| @('rank' | 'ranks')"` // never a call: in cas, rank (x) is two operands
	Int    *string `parser:"| @Int"`
	Paren  *gExpr  `parser:"| '(' @@ ')'"`
	Float  *string `parser:"| @Float"`
}

// gNamed is a name, a call, an element of a table, NAME[INDEX], or an element of a buffer's
// initial contents on a rank, BUF[INDEX]@RANK (only an expect's value may use one); min and max
// are keywords that double as functions.
type gNamed struct {
	Tokens []lexer.Token
	Name   string    `parser:"@(Ident | 'min' | 'max' | 'step' | 'peer' | 'depth' | 'init' | 'from' | 'notify' | 'extern' | 'remote_read' | 'remote_write' | 'remote_atomic')"`
	Call   bool      `parser:"( @'('"`
	Args   []*gExpr  `parser:"( @@ ( ',' @@ )* )? ')'"`
	Index  *gExpr    `parser:"| '[' @@ ']'"` // an element of a table, or of a buffer's initial contents with At
	At     *gPrimary `parser:"( '@' @@ )? )?"`
}

var parser = participle.MustBuild[gFile](
	participle.Lexer(lexDef),
	participle.UseLookahead(1),
)
