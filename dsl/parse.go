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
		if inner := blockStmtError(sc, ute); inner != nil {
			ute = inner
		}
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

// blockStmtError finds the real error of a statement that failed inside a block. At the top
// level participle reports the deepest error, the token where the failed statement went wrong;
// inside a block, a statement that fails at its second token (for i32 in ..., op send = ...)
// leaves the block's repetition without progress, so participle reports the block's missing "}"
// at the statement's first token, or at the separator before it. Parsing the block's statements
// from the failed one on, as a file, gives the same deepest error as at the top level, whatever
// the statement. It returns nil when ute is not a "}" expected at the start of a statement in a
// block or that parse finds nothing further on.
func blockStmtError(sc *scanned, ute *participle.UnexpectedTokenError) *participle.UnexpectedTokenError {
	i := tokIndex(sc.toks, ute.Unexpected.Pos.Offset)
	if i <= 0 || i >= len(sc.toks) || expectedOf(ute) != `"}"` {
		return nil
	}
	if t := sc.toks[i]; t.Type == tokSep {
		i++ // the statement after the separator
	} else if prev := sc.toks[i-1]; prev.Type != tokSep && !isPunct(prev, "{") {
		return nil
	}
	if i >= len(sc.toks) || sc.toks[i].Type == lexer.EOF || isPunct(sc.toks[i], "}") {
		return nil
	}
	end, depth := -1, 0 // end: the "}" that closes the block
	for j := i; j < len(sc.toks) && end < 0; j++ {
		if t := sc.toks[j]; t.Type == tokPunct {
			switch t.Value {
			case "(", "[", "{":
				depth++
			case ")", "]":
				depth--
			case "}":
				if depth == 0 {
					end = j
				}
				depth--
			}
		}
	}
	if end < 0 {
		return nil // not in a block
	}
	toks := make([]lexer.Token, 0, end-i+1)
	toks = append(toks, sc.toks[i:end]...)
	eof := sc.toks[end]
	eof.Type, eof.Value = lexer.EOF, ""
	toks = append(toks, eof)
	_, err := runParser(&scanned{toks: toks})
	var inner *participle.UnexpectedTokenError
	if !errors.As(err, &inner) || inner.Unexpected.Pos.Offset <= ute.Unexpected.Pos.Offset {
		return nil
	}
	if inner.Unexpected.EOF() { // the block's end, not the file's
		inner.Unexpected = sc.toks[end]
	}
	return inner
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
