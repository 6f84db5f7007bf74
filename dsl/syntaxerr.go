package dsl

import (
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/coredag/coredag/diag"
)

// Participle reports a syntax error as the unexpected token and the rest of the grammar sequence
// it was trying to match. This file turns that into a message a person can act on: what was
// expected, where in the statement, what was found instead, and a hint when one is obvious.

// expectKinds are the collectives an expect statement may name, for messages: syntax does not
// know what they mean (ir.ExpectKinds does; a test keeps the two lists alike).
var expectKinds = []string{"allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "gather", "scatter", "allgatherv", "gatherv", "scatterv", "alltoallv", "unchanged", "barrier"}

// expectedOf returns the first element participle expected ("" when it expected the end of the
// statement): a quoted literal such as `"to"` or a grammar struct name such as `GSlice`.
func expectedOf(u *participle.UnexpectedTokenError) string {
	m := u.Message()
	i := strings.Index(m, " (expected ")
	if i < 0 {
		return ""
	}
	rest := strings.TrimSpace(m[i+len(" (expected "):])
	if strings.HasPrefix(rest, "(GExpectValue ") { // what follows expect: a form, general or named
		return "GExpectKind"
	}
	if strings.HasPrefix(rest, `"`) {
		if j := strings.Index(rest[1:], `"`); j >= 0 {
			return rest[:j+2]
		}
	}
	end := strings.IndexAny(rest, " ()?*+|")
	if end < 0 {
		end = len(rest)
	}
	return rest[:end]
}

// expectedText describes a grammar element in the words of docs/language.md.
func expectedText(exp string) string {
	switch exp {
	case "GIdent", "GName", "GParamName":
		return "a name"
	case "GSlice":
		return "a buffer slice (buf, buf[i] or buf[lo:hi])"
	case "GExpr", "GUnary", "GPrimary", "GPow", "GNamed", "GPrefix":
		return "an expression"
	case "GType":
		return "an element type (u8 i32 u32 i64 u64 f32 f64)"
	case "GBlock":
		return `"{"`
	case "GOperation":
		return "an operation (send, recv, write, read, atomic, reduce, copy, nop or wait)"
	case "GAtomicAdd":
		return `"add" or "cas"`
	case "GReduceOp":
		return "a reduction operator (sum prod min max band bor bxor)"
	case "GStmt":
		return "a statement"
	case "GExpectKind":
		return "a collective (" + strings.Join(expectKinds, ", ") + ") or BUF[SLICE] == VALUE"
	}
	return exp
}

// stmtKeywords are the words that start a statement.
var stmtKeywords = map[string]bool{"plan": true, "param": true, "let": true, "buffer": true,
	"queue": true, "op": true, "for": true, "if": true, "var": true, "assert": true, "def": true}

// opKeywords are the words that start an operation.
var opKeywords = map[string]bool{"send": true, "recv": true, "write": true, "read": true,
	"atomic": true, "reduce": true, "copy": true, "nop": true}

// stmtContext finds the statement that contains toks[i]: its first token and, for an op
// statement, the operation keyword.
func stmtContext(toks []lexer.Token, i int) (stmt, op string, cas bool, start int) {
	depth := 0
	for j := i - 1; j >= 0; j-- {
		t := toks[j]
		if t.Type == tokSep && depth == 0 {
			start = j + 1
			break
		}
		if t.Type == tokPunct {
			switch t.Value {
			case ")", "]", "}":
				depth++
			case "(", "[", "{":
				depth--
			}
		}
		if depth < 0 {
			start = j + 1
			break
		}
	}
	if start >= len(toks) || start >= i {
		return "", "", false, start
	}
	first := toks[start]
	if first.Type == tokKeyword {
		stmt = first.Value
	} else if first.Type == tokIdent {
		stmt = "dependency"
	}
	if stmt == "op" {
		for j := start; j < i; j++ {
			if toks[j].Type == tokKeyword && opKeywords[toks[j].Value] {
				op = toks[j].Value
				cas = op == "atomic" && j+1 < i && toks[j+1].Value == "cas"
				break
			}
		}
	}
	return stmt, op, cas, start
}

// explain builds the diagnostic for an unexpected token tok where the grammar expected exp.
func explain(sc *scanned, tok lexer.Token, exp string) (diag.Pos, string) {
	if exp == `"}"` {
		// Inside a block, the "}" that closes it may follow a complete statement: the same as
		// the end of a statement at the top level, where participle expects nothing.
		exp = ""
	}
	i := tokIndex(sc.toks, tok.Pos.Offset)
	stmt, op, cas, start := stmtContext(sc.toks, i)
	got := describe(tok)
	var prev lexer.Token
	if i > 0 {
		prev = sc.toks[i-1]
	}

	// A misspelt statement keyword reads as the start of a dependency statement.
	if stmt == "dependency" && start < i && sc.toks[start].Type == tokIdent {
		if s := suggest(sc.toks[start], stmtWords); s != "" {
			first := sc.toks[start]
			return tokPos(first), fmt.Sprintf("unknown statement %q%s", first.Value, s)
		}
	}

	// A reserved word where a name belongs.
	if tok.Type == tokKeyword && tok.Value == "rank" && stmt == "param" {
		return tokPos(tok), `"rank" is read-only: it is the rank running the plan; only "ranks" (the world size) and your own names can be params`
	}
	if tok.Type == tokKeyword && (exp == "GIdent" || exp == "GName" || exp == "GSlice" || exp == "GParamName") {
		return tokPos(tok), fmt.Sprintf("%q is a reserved keyword and cannot be used as a name; pick another name (for example %q)",
			tok.Value, tok.Value+"_")
	}

	// At the start of a statement (scan drops the separator before "else" and "}", so a stray
	// one looks like the continuation of the statement before it).
	if i == start || exp == "" && (tok.Type == tokKeyword && tok.Value == "else" || isPunct(tok, "}")) {
		switch {
		case tok.Type == tokKeyword && tok.Value == "else":
			return tokPos(tok), `"else" without an "if": else must follow the "}" that closes an if block`
		case tok.Type == tokKeyword && opKeywords[tok.Value]:
			return tokPos(tok), fmt.Sprintf("%q is an operation, not a statement: declare it as op NAME = %s ...", tok.Value, tok.Value)
		case isPunct(tok, "}"):
			return tokPos(tok), `unexpected "}": there is no open block to close`
		}
		msg := "expected a statement (plan, param, let, var, def, assert, buffer, queue, op, for, if, expect, an assignment x = ..., or a dependency a, b after c), got " + got
		return tokPos(tok), msg + suggest(tok, stmtWords)
	}

	// Alternatives that failed on their first token leave no expectation: name them.
	if exp == "" {
		switch {
		case prev.Type == tokKeyword && prev.Value == "atomic":
			exp = "GAtomicAdd"
		case prev.Type == tokKeyword && prev.Value == "reduce":
			exp = "GReduceOp"
		case isPunct(prev, "=") && stmt == "op":
			exp = "GOperation"
		}
	}

	// A word of the buffer statement out of its place.
	if exp == "" && stmt == "buffer" && tok.Type == tokKeyword && tok.Value == "extern" {
		return tokPos(tok), `"extern" is written once, right after the count: buffer NAME TYPE[COUNT] extern [ACCESS...] [init EXPR]`
	}

	// The statement is complete but more follows on the line.
	if exp == "" {
		where := "the " + stmt + " statement"
		if op != "" {
			where = "the " + op + " operation"
		}
		msg := fmt.Sprintf("unexpected %s after %s: put each statement on its own line or separate statements with \";\"", got, where)
		if cas {
			msg += "; the compare and swap values of atomic cas are primaries, so parenthesise expressions, as in (x + 1)"
		}
		return tokPos(tok), msg + suggest(tok, tailWords)
	}

	if exp == `">="` && stmt == "op" {
		// wait's word form failed past its slice: the count of the other form is a primary.
		return tokPos(tok), fmt.Sprintf("expected \">=\" after the word of wait, got %s; the count of wait N writes to REGION is a primary, so parenthesise an expression, as in wait (n + 1) writes to REGION", got)
	}
	at := tokPos(tok)
	if i > 0 && isPunct(tok, "}") && tok.Pos.Line > prev.Pos.Line {
		got = "end of line" // scan drops the separator before "}": the line ended first
	}
	if (tok.EOF() || tok.Type == tokSep && tok.Value == "\n" || got == "end of line") && i > 0 {
		at = tokEnd(prev) // point at where the line's code ends, not past a trailing comment
	}
	return at, fmt.Sprintf("expected %s%s, got %s", expectedText(exp), where(stmt, op, exp, prev), got) + hint(stmt, exp, tok)
}

// where says where in the statement an element was expected.
func where(stmt, op, exp string, prev lexer.Token) string {
	switch {
	case exp == `"to"` && (op == "write" || op == "read" || op == "copy"):
		return " after the source slice of " + op
	case exp == `"to"` && stmt == "queue":
		return " after the queue name"
	case exp == `"from"` && op == "reduce":
		return " after the destination slice of reduce"
	case exp == `"="` && (stmt == "param" || stmt == "let" || stmt == "op"):
		return " after the name in " + stmt
	case exp == `"in"` && stmt == "for":
		return " after the loop variable"
	case exp == `".."` && stmt == "for":
		return " after the start of the range (for VAR in FROM .. TO)"
	case exp == `"after"` && stmt == "dependency":
		return ` in a dependency statement (a, b after c)`
	case exp == "GBlock" && (stmt == "for" || stmt == "if"):
		return " to open the body of " + stmt
	case exp == `"["` && stmt == "buffer":
		return " after the element type (buffer NAME TYPE[COUNT])"
	case exp == "GType":
		return " after the buffer name"
	case exp == "GExpectKind":
		return " after expect"
	case exp == "GSlice" && op != "":
		if isPunct(prev, "to") || prev.Value == "to" {
			return " as the destination of " + op
		}
		if prev.Value == "from" {
			return " as the source of reduce"
		}
		return " in " + op
	case exp == "GName" && (prev.Value == "after" || isPunct(prev, ",")):
		return " in the after list"
	case exp == "GName" && prev.Type == tokKeyword && opKeywords[prev.Value]:
		return " (the queue) after " + prev.Value
	case exp == "GName" && prev.Value == "peer":
		return " (the peer's queue) after peer"
	case op != "":
		return " in " + op
	case stmt == "dependency":
		return " in the dependency statement"
	case stmt != "":
		return " in the " + stmt + " statement"
	}
	return ""
}

// hint adds advice for common slips.
func hint(stmt, exp string, tok lexer.Token) string {
	switch {
	case tok.Type == tokKeyword && tok.Value == "if" && (exp == "GUnary" || exp == "GPrimary" || exp == "GExpr"):
		return "; a conditional is a whole expression: as an operand, parenthesise it, as in 1 + (if c then a else b)"
	case stmt == "dependency" && isPunct(tok, "="):
		return "; to declare a constant write let NAME = EXPR, an operation op NAME = ..."
	case exp == "GOperation":
		return suggest(tok, []string{"send", "recv", "write", "read", "atomic", "reduce", "copy", "nop"})
	case exp == "GAtomicAdd":
		return suggest(tok, []string{"add", "cas"})
	case exp == "GReduceOp":
		return suggest(tok, []string{"sum", "prod", "min", "max", "band", "bor", "bxor"})
	case exp == "GType":
		return suggest(tok, []string{"u8", "i32", "u32", "i64", "u64", "f32", "f64"})
	case strings.HasPrefix(exp, `"`):
		return suggest(tok, []string{strings.Trim(exp, `"`)})
	}
	return ""
}

// Words that start a statement, and words that may follow a complete part of one.
var (
	stmtWords = []string{"plan", "param", "let", "buffer", "queue", "op", "for", "if", "var", "assert", "def", "expect"}
	tailWords = []string{"inline", "notify", "after", "peer", "depth", "init", "step", "to", "from",
		"extern", "remote_read", "remote_write", "remote_atomic", "else"}
)

// suggest proposes a keyword for a misspelt word.
func suggest(tok lexer.Token, words []string) string {
	if tok.Type != tokIdent && tok.Type != tokKeyword {
		return ""
	}
	if best := Closest(tok.Value, words); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
