package dsl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/coredag/coredag/diag"
)

// Parse parses the .dag text src, read from filename, into a File. On failure it returns a nil
// File and a diag.List (sorted, each diagnostic once) whose entries point at the offending
// token and say how to fix it.
func Parse(filename string, src []byte) (f *File, err error) {
	var errs diag.List
	sc := scan(filename, src, &errs)
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	g, perr := runParser(sc)
	if perr != nil {
		errs = append(errs, syntaxError(filename, sc, perr))
		return nil, errs
	}
	c := &converter{file: filename, errs: &errs}
	f = &File{
		Name:     filename,
		Comments: sc.comments,
		Span:     Span{From: diag.At(filename, 1, 1), To: sc.posAt(diag.File(filename), len(src))},
	}
	f.Stmts = c.stmts(g.Stmts)
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return f, nil
}

// runParser runs the participle grammar over the prepared tokens. Participle reports grammar
// bugs by panicking; that must never take down a caller, so a panic becomes an error.
func runParser(sc *scanned) (g *gFile, err error) {
	defer func() {
		if r := recover(); r != nil {
			g, err = nil, fmt.Errorf("internal parser error: %v", r)
		}
	}()
	peek, err := lexer.Upgrade(&sliceLexer{toks: sc.toks})
	if err != nil {
		return nil, err
	}
	return parser.ParseFromLexer(peek)
}

// syntaxError turns a participle error into a diagnostic at the offending token.
func syntaxError(filename string, sc *scanned, err error) *diag.Diagnostic {
	var ute *participle.UnexpectedTokenError
	if errors.As(err, &ute) {
		p, msg := explain(sc, ute.Unexpected, expectedOf(ute))
		return &diag.Diagnostic{Code: diag.Syntax, Pos: p, Msg: msg}
	}
	var pe participle.Error
	if errors.As(err, &pe) {
		p := pe.Position()
		pos := diag.At(filename, p.Line, p.Column)
		if !pos.IsValid() {
			pos = diag.At(filename, 1, 1)
		}
		code, msg := diag.Syntax, pe.Message()
		if strings.HasPrefix(msg, "too many iterations of ") { // participle's repetition limit
			code, msg = diag.Limit, "statement too long: more than a million repetitions of one element; split it"
		}
		return &diag.Diagnostic{Code: code, Pos: pos, Msg: msg}
	}
	return &diag.Diagnostic{Code: diag.Syntax, Pos: diag.At(filename, 1, 1), Msg: err.Error()}
}

// tokIndex finds the index of the token at offset off (tokens are in offset order).
func tokIndex(toks []lexer.Token, off int) int {
	lo, hi := 0, len(toks)
	for lo < hi {
		m := (lo + hi) / 2
		if toks[m].Pos.Offset < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
