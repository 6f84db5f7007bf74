package dsl

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/coredag/coredag/diag"
)

// The lexer is participle's regexp lexer, followed by one linear pass (scan) that does what a
// regular language cannot: it recomputes columns in bytes, retags reserved words as keywords,
// pulls comments out of the stream, drops newlines inside (...) and [...], collapses runs of
// statement separators, and checks bracket nesting, so the grammar only sees meaningful tokens.

// lexDef lists the token rules in the order they are tried. Sep is a statement separator
// (a line break: LF, CRLF or a lone CR, or a run of them with blank lines between, which scan
// reads as its last one; or ";"). Invalid catches any other character so lexing itself never
// fails: a run of characters that start no token (one diagnostic for the run, so a file of
// garbage costs one pass and one message), or else the one character a token rule refused (an
// unterminated string's quote, or a lone ".").
// Keyword matches nothing here: scan retags reserved Idents with its type.
var lexDef = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `#[^\r\n]*`},
	{Name: "Sep", Pattern: `(?:\r\n?|\n)(?:[ \t\f\v]*(?:\r\n?|\n))*|;`},
	{Name: "Space", Pattern: `[ \t\f\v]+`},
	{Name: "Float", Pattern: `[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?[A-Za-z0-9_]*|[0-9]+[eE][+-]?[0-9]+[A-Za-z0-9_]*`},
	{Name: "Int", Pattern: `[0-9][A-Za-z0-9_]*`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "String", Pattern: `"(?:[^"\\\r\n]|\\.)*"`},
	{Name: "Punct", Pattern: `<<=|>>=|[-+*/%&|^]=|\*\*|\.\.|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!<>=(){}\[\],:@]`},
	{Name: "Invalid", Pattern: `[^#\r\n; \t\f\v0-9A-Za-z_"\-+*/%&|^!<>=(){}\[\],:@.]+|.`},
	{Name: "Keyword", Pattern: `[^\x00-\x{10FFFF}]`},
})

// Token types of lexDef, looked up once.
var (
	symbols     = lexDef.Symbols()
	tokComment  = symbols["Comment"]
	tokSep      = symbols["Sep"]
	tokSpace    = symbols["Space"]
	tokFloat    = symbols["Float"]
	tokInt      = symbols["Int"]
	tokIdent    = symbols["Ident"]
	tokPunct    = symbols["Punct"]
	tokInvalid  = symbols["Invalid"]
	tokKeyword  = symbols["Keyword"]
	keywordList = []string{
		"plan", "param", "let", "buffer", "queue", "op", "for", "in", "step", "if", "else", "to",
		"peer", "depth", "init", "after", "send", "recv", "write", "read", "atomic", "add", "cas",
		"reduce", "from", "copy", "nop", "inline", "notify", "extern", "remote_read", "remote_write",
		"remote_atomic", "sum", "prod", "min", "max", "band", "bor", "bxor", "u8", "i32", "u32",
		"i64", "u64", "f32", "f64", "rank", "ranks", "expect", "var", "assert", "def", "then",
	}
	keywords = func() map[string]bool {
		m := make(map[string]bool, len(keywordList))
		for _, k := range keywordList {
			m[k] = true
		}
		return m
	}()
)

// softKeywords are the keywords that only start a clause (of a queue, a for, a buffer, a reduce,
// a write or an expect) at a place where no name can stand: elsewhere they are names. The
// grammar's name rules (gIdent, gParamName, gNamed) list them.
var softKeywords = []string{"step", "peer", "depth", "init", "from", "notify", "extern", "remote_read", "remote_write", "remote_atomic"}

// SoftKeywords returns the keywords that may also be used as names (docs/language.md §3).
func SoftKeywords() []string { return append([]string(nil), softKeywords...) }

// Keywords returns the reserved words of the language, in the order of docs/language.md §3
// (Lexical structure).
func Keywords() []string { return append([]string(nil), keywordList...) }

// IsKeyword reports whether s is a reserved word.
func IsKeyword(s string) bool { return keywords[s] }

// maxNesting bounds the depth of brackets, so a pathological input cannot exhaust the stack of
// the recursive-descent parser.
const maxNesting = 200

// The parser needs about a kilobyte per token and takes microseconds for each, so a file is
// refused past maxTokens (a few hundred megabytes), and one statement past maxOperators
// operators: far more than any plan needs, and well before the parser's own repetition limit
// (a million), whose message names the grammar's internals. Comments never reach the parser,
// but each is a node of the File and takes the lexer a microsecond or two: a file of nothing
// but "#" lines would cost half a gigabyte and half a minute, so past maxComments it is refused
// too. A plan that needs maxTokens tokens has room for a comment on each of its statements.
const (
	maxTokens    = 1 << 18
	maxComments  = maxTokens
	maxOperators = 1 << 14
)

// operators are the punctuation tokens that are operators of expressions.
var operators = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "**": true, "&": true, "|": true, "^": true,
	"!": true, "<<": true, ">>": true, "<": true, "<=": true, ">": true, ">=": true, "==": true,
	"!=": true, "&&": true, "||": true,
}

// scanned is the output of scan.
type scanned struct {
	toks     []lexer.Token // meaningful tokens, ending with EOF
	comments []*Comment
	lines    []int // offsets of line starts, for positions of arbitrary offsets
}

// posAt converts a byte offset into a position.
func (s *scanned) posAt(file diag.FileID, off int) diag.Pos {
	line := sort.Search(len(s.lines), func(i int) bool { return s.lines[i] > off }) // first start past off
	line = max(line, 1)                                                             // in a byte-order mark
	return diag.Pos{File: file, Line: uint32(line), Col: uint32(max(off-s.lines[line-1], 0) + 1)}
}

// scan lexes src and prepares the token stream for the grammar. Lexical errors (invalid
// characters, unbalanced or too deeply nested brackets) are added to errs.
func scan(filename string, src []byte, errs *diag.List) *scanned {
	file := diag.File(filename)
	s := &scanned{lines: diag.LineStarts(src)}
	skip := s.lines[0] // a byte-order mark: not part of the text
	lx, err := lexDef.LexString(filename, string(src[skip:]))
	if err != nil { // cannot happen: Invalid matches any character
		errs.Add(diag.Syntax, diag.Pos{File: file, Line: 1, Col: 1}, "cannot read the file: %v", err)
		return s
	}
	var (
		stack      []lexer.Token // open brackets
		line       = 1           // line of the current token
		lineStart  = skip
		pendingSep lexer.Token // a separator not yet known to be needed, when hasSep
		hasSep     bool
		powChain   int          // "**" since the last separator: each one nests the parse
		opCount    int          // operators since the last separator
		stmtStart  *lexer.Token // the first token since the last separator
		slab       []Comment    // where comments are allocated, a block at a time
	)
	s.toks = make([]lexer.Token, 0, min(len(src)/3, maxTokens)+1)
	emit := func(t lexer.Token) {
		if hasSep {
			// A separator before "}" or "else", or at the end, or after "{" or another
			// separator or at the start, carries no meaning.
			last := lexer.Token{}
			if len(s.toks) > 0 {
				last = s.toks[len(s.toks)-1]
			}
			needed := len(s.toks) > 0 && !isPunct(last, "{") && !(last.Type == tokKeyword && last.Value == "else") &&
				t.Type != lexer.EOF && !isPunct(t, "}") && !(t.Type == tokKeyword && t.Value == "else")
			if needed {
				s.toks = append(s.toks, pendingSep)
			}
			hasSep = false
		}
		s.toks = append(s.toks, t)
	}
	for {
		t, err := lx.Next()
		if err != nil {
			errs.Add(diag.Syntax, s.posAt(file, t.Pos.Offset), "cannot read the file: %v", err)
			break
		}
		// Participle counts columns in runes and we promise bytes: recompute from the offset.
		t.Pos.Offset += skip
		if t.Type == tokSep && t.Value != ";" {
			// A run of line breaks stands for its last one, the one the grammar would have
			// kept had each been a token: one token for a run of blank lines, so a file of
			// them costs the lexer one token, not one per line.
			if n := len(t.Value); n >= 2 && t.Value[n-2:] == "\r\n" {
				t.Pos.Offset += n - 2
			} else {
				t.Pos.Offset += n - 1
			}
			t.Value = "\n" // one kind of line break for the grammar and messages
		}
		for line < len(s.lines) && s.lines[line] <= t.Pos.Offset {
			lineStart = s.lines[line]
			line++
		}
		t.Pos.Line, t.Pos.Column = line, t.Pos.Offset-lineStart+1
		switch t.Type {
		case lexer.EOF:
			for _, o := range stack {
				if _, ok := errs.AddCapped(diag.Syntax, tokPos(o), "unclosed %q: add the matching %q", o.Value, closer(o.Value)); !ok {
					break
				}
			}
			hasSep = false
			emit(t)
			return s
		case tokSpace:
			continue
		case tokComment:
			if len(s.comments) >= maxComments {
				errs.AddCapped(diag.Limit, tokPos(t), "the file has more than %d comments: keep the comments a reader needs", maxComments)
				return s
			}
			if len(slab) == cap(slab) {
				slab = make([]Comment, 0, min(max(2*cap(slab), 16), 4096))
			}
			slab = append(slab, Comment{Span: Span{From: tokPos(t), To: tokEnd(t)}, Text: t.Value})
			s.comments = append(s.comments, &slab[len(slab)-1])
			continue
		case tokInvalid:
			if _, ok := errs.AddCapped(diag.Syntax, invalidPos(t), "%s", invalidMsg(t.Value)); !ok {
				return s
			}
			continue
		case tokSep:
			if t.Value == "\n" && len(stack) > 0 && stack[len(stack)-1].Value != "{" {
				continue // a newline inside (...) or [...] does not end a statement
			}
			powChain, opCount, stmtStart = 0, 0, nil
			if !hasSep || pendingSep.Value == "\n" {
				pendingSep, hasSep = t, true // by value: no allocation per separator
			}
			continue
		case tokIdent:
			if keywords[t.Value] {
				t.Type = tokKeyword
			}
		case tokPunct:
			if operators[t.Value] {
				if opCount++; opCount > maxOperators {
					at := t
					if stmtStart != nil {
						at = *stmtStart
					}
					errs.AddCapped(diag.Limit, tokPos(at), "expression too long: more than %d operators in one statement; split it with let", maxOperators)
					return s
				}
			}
			switch t.Value {
			case "**":
				if powChain++; powChain > maxNesting {
					errs.AddCapped(diag.Limit, tokPos(t), "more than %d \"**\" in one statement: split the expression with let", maxNesting)
					return s
				}
			case "(", "[", "{":
				if len(stack) >= maxNesting {
					errs.AddCapped(diag.Limit, tokPos(t), "brackets nested more than %d deep: simplify the expression or use let", maxNesting)
					return s
				}
				stack = append(stack, t)
			case ")", "]", "}":
				if len(stack) == 0 {
					break // the grammar reports the stray closer with its context
				}
				top := stack[len(stack)-1]
				if closer(top.Value) != t.Value {
					d, _ := errs.AddCapped(diag.Syntax, tokPos(t), "unexpected %q: the innermost open bracket is %q; close it with %q first",
						t.Value, top.Value, closer(top.Value))
					d.Relate(tokPos(top), fmt.Sprintf("the innermost open bracket %q", top.Value))
					return s
				}
				stack = stack[:len(stack)-1]
			}
		}
		if len(s.toks) >= maxTokens {
			errs.AddCapped(diag.Limit, tokPos(t), "the file has more than %d tokens (words, numbers and symbols): write repeated statements as for loops", maxTokens)
			return s
		}
		if stmtStart == nil {
			stmtStart = &t
		}
		emit(t)
	}
	return s
}

// maxQuotedInvalid is how many characters of a run of invalid characters a message quotes.
const maxQuotedInvalid = 16

// invalidPos is where the diagnostic about an Invalid token goes: its first byte that is not
// UTF-8 if it has one (what the message is about), else its start. A run holds no line break.
func invalidPos(t lexer.Token) diag.Pos {
	p := tokPos(t)
	if i := firstInvalidByte(t.Value); i > 0 {
		p.Col += uint32(i)
	}
	return p
}

// invalidMsg is the message about an Invalid token v: one character, or a run of them.
func invalidMsg(v string) string {
	if i := firstInvalidByte(v); i >= 0 {
		return fmt.Sprintf("invalid byte %#02x: a .dag file is UTF-8 text", v[i])
	}
	r, n := utf8.DecodeRuneInString(v)
	switch {
	case r == '"':
		return "unterminated string: close it with \" on the same line"
	case n == len(v):
		return fmt.Sprintf("invalid character %q: not part of the language (comments start with #)", r)
	}
	quoted, count := v, utf8.RuneCountInString(v)
	if count > maxQuotedInvalid {
		cut := 0
		for range maxQuotedInvalid {
			_, n := utf8.DecodeRuneInString(v[cut:])
			cut += n
		}
		return fmt.Sprintf("invalid characters %q… (%d in a row): not part of the language (comments start with #)", v[:cut], count)
	}
	return fmt.Sprintf("invalid characters %q: not part of the language (comments start with #)", quoted)
}

// firstInvalidByte is the offset of the first byte of s that is not UTF-8, -1 if none.
func firstInvalidByte(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return -1
}

func closer(open string) string {
	switch open {
	case "(":
		return ")"
	case "[":
		return "]"
	}
	return "}"
}

func isPunct(t lexer.Token, v string) bool { return t.Type == tokPunct && t.Value == v }

// tokPos is where t starts; scan has already fixed its line and column.
func tokPos(t lexer.Token) diag.Pos {
	return diag.At(t.Pos.Filename, t.Pos.Line, t.Pos.Column)
}

// tokEnd is the position just past t. Only Sep spans a line break and it never ends a node.
func tokEnd(t lexer.Token) diag.Pos {
	p := tokPos(t)
	p.Col += uint32(len(t.Value))
	return p
}

// describe names a token for a message: a quoted value, "end of line" or "end of file".
func describe(t lexer.Token) string {
	switch {
	case t.EOF():
		return "end of file"
	case t.Type == tokSep && t.Value == "\n":
		return "end of line"
	}
	return fmt.Sprintf("%q", t.Value)
}

// sliceLexer feeds participle the tokens prepared by scan.
type sliceLexer struct {
	toks []lexer.Token
	i    int
}

func (l *sliceLexer) Next() (lexer.Token, error) {
	if l.i >= len(l.toks) {
		return l.toks[len(l.toks)-1], nil
	}
	l.i++
	return l.toks[l.i-1], nil
}
