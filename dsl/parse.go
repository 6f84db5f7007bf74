package dsl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// Parse parses the .dag text src, read from filename, into a File. On failure it returns a nil
// File and an ErrorList (sorted, each diagnostic once) whose entries point at the offending
// token and say how to fix it.
func Parse(filename string, src []byte) (f *File, err error) {
	var errs ErrorList
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
		Span:     Span{From: Pos{File: filename, Line: 1, Col: 1}, To: sc.posAt(filename, len(src))},
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
func syntaxError(filename string, sc *scanned, err error) *Error {
	var ute *participle.UnexpectedTokenError
	if errors.As(err, &ute) {
		p, msg := explain(sc, ute.Unexpected, expectedOf(ute))
		return &Error{Pos: p, Msg: msg}
	}
	var pe participle.Error
	if errors.As(err, &pe) {
		p := pe.Position()
		pos := Pos{File: filename, Offset: p.Offset, Line: p.Line, Col: p.Column}
		if !pos.IsValid() {
			pos = Pos{File: filename, Line: 1, Col: 1}
		}
		msg := pe.Message()
		if strings.HasPrefix(msg, "too many iterations of ") { // participle's repetition limit
			msg = "statement too long: more than a million repetitions of one element; split it"
		}
		return &Error{Pos: pos, Msg: msg}
	}
	return &Error{Pos: Pos{File: filename, Line: 1, Col: 1}, Msg: err.Error()}
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
