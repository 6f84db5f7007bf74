package dsl

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pos is a position in a source file. Line and Col are 1-based; Col counts bytes.
// The zero Pos means "no position".
type Pos struct {
	File   string
	Offset int
	Line   int
	Col    int
}

// IsValid reports whether p names a real place in a file.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String formats p as file:line:col (or the parts of it that are known).
func (p Pos) String() string {
	switch {
	case !p.IsValid() && p.File == "":
		return "-"
	case !p.IsValid():
		return QuoteName(p.File)
	case p.File == "":
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", QuoteName(p.File), p.Line, p.Col)
}

// Before reports whether p sorts before q (file, then offset in the file).
func (p Pos) Before(q Pos) bool {
	if p.File != q.File {
		return p.File < q.File
	}
	if p.Line != q.Line {
		return p.Line < q.Line
	}
	return p.Col < q.Col
}

// Error is one diagnostic: a position and a message that says what is wrong and how to fix it.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList collects the diagnostics of a phase. Like go/scanner.ErrorList it is sorted by
// position and deduplicated before it is reported.
type ErrorList []*Error

// Add appends a diagnostic at pos.
func (l *ErrorList) Add(pos Pos, format string, args ...any) {
	*l = append(*l, &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// Len, Less and Swap implement sort.Interface.
func (l ErrorList) Len() int      { return len(l) }
func (l ErrorList) Swap(i, j int) { l[i], l[j] = l[j], l[i] }
func (l ErrorList) Less(i, j int) bool {
	if l[i].Pos != l[j].Pos {
		return l[i].Pos.Before(l[j].Pos)
	}
	return l[i].Msg < l[j].Msg
}

// Sort sorts the list by position and removes exact duplicates (same position and message).
func (l *ErrorList) Sort() {
	sort.Stable(*l)
	out := (*l)[:0]
	for i, e := range *l {
		if i > 0 && e.Pos == (*l)[i-1].Pos && e.Msg == (*l)[i-1].Msg {
			continue
		}
		out = append(out, e)
	}
	*l = out
}

// Error prints the first error and how many more there are.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	return fmt.Sprintf("%s (and %d more errors)", l[0], len(l)-1)
}

// Err returns nil for an empty list and the list itself otherwise.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Sources maps file names to their text, so diagnostics can quote the offending line.
type Sources map[string][]byte

// Line returns the text of line n (1-based) of file, without its line break (LF, CRLF or a lone
// CR, as the lexer counts lines) and, on line 1, without a byte-order mark.
func (s Sources) Line(file string, n int) (string, bool) {
	src, ok := s[file]
	if !ok || n < 1 {
		return "", false
	}
	starts := lineStarts(src)
	if n > len(starts) {
		return "", false
	}
	end := len(src)
	if n < len(starts) {
		end = starts[n]
	}
	line := src[starts[n-1]:end]
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return string(line), true
}

// PrintError writes err to w. Diagnostics (an *Error or an ErrorList) print one per entry as
// file:line:col: message, followed by the source line and a caret under the column when the
// source is known. Any other error prints as its message. Control characters of the text (a
// plan's line, a file name) are printed escaped, so a file cannot send escape sequences to the
// terminal.
func PrintError(w io.Writer, err error, src Sources) {
	var list ErrorList
	switch e := err.(type) {
	case nil:
		return
	case ErrorList:
		list = e
	case *Error:
		list = ErrorList{e}
	default:
		fmt.Fprintln(w, EscapeControls(err.Error()))
		return
	}
	for _, e := range list {
		fmt.Fprintln(w, EscapeControls(e.Error()))
		line, ok := src.Line(e.Pos.File, e.Pos.Line)
		if !ok || !e.Pos.IsValid() {
			continue
		}
		shown := escape(line, "\t")
		fmt.Fprintf(w, "    %s\n    %s^\n", expandTabs(shown), caretPad(shown, len(escape(line[:min(max(e.Pos.Col-1, 0), len(line))], "\t"))+1))
	}
}

func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

// caretPad returns the blank prefix that puts a caret under byte column col of line,
// counting a tab as four columns like expandTabs does.
func caretPad(line string, col int) string {
	var b strings.Builder
	for i := 0; i < col-1 && i < len(line); i++ {
		if line[i] == '\t' {
			b.WriteString("    ")
		} else if line[i]&0xC0 != 0x80 { // count each UTF-8 character once
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// EscapeControls returns s with the characters a terminal may act on written as escapes (\x1b,
// \u202e), except line breaks and tabs: C0 and C1 control characters, DEL, bidirectional
// formatting characters and bytes that are not UTF-8. Text from a plan or a file name goes
// through it before it is printed.
func EscapeControls(s string) string { return escape(s, "\n\t") }

// QuoteName returns a name (a file name) as it is when it is plain text, and quoted with Go
// escapes when it holds anything EscapeControls would escape, even a line break or tab.
func QuoteName(name string) string {
	if escape(name, "") == name {
		return name
	}
	return strconv.Quote(name)
}

// escape writes the unsafe characters of s as escapes, keeping those in keep.
func escape(s, keep string) string {
	unsafe := func(r rune) bool {
		return r == utf8.RuneError || unicode.IsControl(r) && !strings.ContainsRune(keep, r) ||
			r == 0x061c || r == 0x200e || r == 0x200f || 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069
	}
	if strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1 || r < 0x80 && unsafe(r):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r != utf8.RuneError && unsafe(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
