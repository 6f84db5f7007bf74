package diag

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sources maps file names to their text, so a printed diagnostic can quote the offending line.
type Sources map[string][]byte

// Line returns the text of line n (1-based) of file, without its line break (LF, CRLF or a lone
// CR, as LineStarts counts lines) and, on line 1, without a byte-order mark.
func (s Sources) Line(file string, n int) (string, bool) {
	line, ok := s.line(map[string]*lineIndex{}, file, n)
	return string(line), ok
}

// lineIndex is the start of each line of a file as far as a printer has needed them: the
// first entries of LineStarts, for the bytes before done. A diagnostic near the top of a file
// of millions of lines costs only the lines above it.
type lineIndex struct {
	starts []int
	done   int
}

// line is Line with the line starts of each file kept in cache between calls. The line is a
// slice of the source, not a copy: a printer quotes a window of it (clip), and a generated line
// may be megabytes long.
func (s Sources) line(cache map[string]*lineIndex, file string, n int) ([]byte, bool) {
	src, ok := s[file]
	if !ok || n < 1 {
		return nil, false
	}
	ix := cache[file]
	if ix == nil {
		first := 0
		if bytes.HasPrefix(src, []byte(bom)) {
			first = len(bom)
		}
		ix = &lineIndex{starts: []int{first}, done: first}
		cache[file] = ix
	}
	for len(ix.starts) <= n && ix.done < len(src) { // until the start of line n+1 (or the end)
		i := bytes.IndexAny(src[ix.done:], "\r\n")
		if i < 0 {
			ix.done = len(src)
			break
		}
		i += ix.done
		if src[i] == '\r' && i+1 < len(src) && src[i+1] == '\n' {
			i++ // CRLF is one line break
		}
		ix.starts = append(ix.starts, i+1)
		ix.done = i + 1
	}
	starts := ix.starts
	if n > len(starts) {
		return nil, false
	}
	end := len(src)
	if n < len(starts) {
		end = starts[n]
	}
	line := src[starts[n-1]:end]
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, true
}

// bom is the UTF-8 byte-order mark some editors put at the start of a file.
const bom = "\ufeff"

// LineStarts returns the offsets at which the lines of src start: after LF, CRLF or a lone CR.
// The first line starts after a byte-order mark, so columns there count from the first
// character a reader sees. This is how positions count lines and columns.
func LineStarts(src []byte) []int {
	first := 0
	if bytes.HasPrefix(src, []byte(bom)) {
		first = len(bom)
	}
	// Sized up front (counting is a fast pass): a file of millions of short lines would
	// otherwise leave twice its final size in garbage as the slice grows.
	n := 1 + bytes.Count(src, []byte("\n")) + bytes.Count(src, []byte("\r")) - bytes.Count(src, []byte("\r\n"))
	lines := make([]int, 1, n)
	lines[0] = first
	for i, c := range src {
		if c == '\n' || c == '\r' && (i+1 == len(src) || src[i+1] != '\n') {
			lines = append(lines, i+1)
		}
	}
	return lines
}

// Print writes err to w. A diagnostic (a *Diagnostic or a List) prints as its first line,
// file:line:col: message, then, when src holds the file, the source line with a caret under the
// column, then one indented line per related position, file:line:col: label. Any other error
// prints as its message. Control characters of the text (a plan's line, a file name, a message
// quoting the plan) are printed escaped, so a file cannot send escape sequences to the terminal.
func Print(w io.Writer, err error, src Sources) {
	var list List
	switch e := err.(type) {
	case nil:
		return
	case List:
		list = e
	case *Diagnostic:
		list = List{e}
	default:
		fmt.Fprintln(w, EscapeControls(err.Error()))
		return
	}
	lines := map[string]*lineIndex{} // line starts of each quoted file, found once
	for _, d := range list {
		fmt.Fprintln(w, EscapeControls(d.Error()))
		if whole, ok := src.line(lines, d.Pos.Filename(), int(d.Pos.Line)); ok && d.Pos.IsValid() {
			col := min(int(d.Pos.Col)-1, len(whole))
			line, col := clip(whole, max(col, 0)) // a copy of the window only
			shown := escape(line, "\t")
			pad := caretPad(shown, len(escape(line[:col], "\t"))+1)
			fmt.Fprintf(w, "    %s\n    %s^\n", expandTabs(shown), pad)
		}
		for _, r := range d.Related {
			fmt.Fprintf(w, "    %s: %s\n", r.Pos, EscapeControls(r.Label))
		}
	}
}

// maxQuoted is the most bytes of a source line a diagnostic quotes: a longer line (a generated
// plan's) is cut to a window around the column, marked with "…" where it was cut.
const maxQuoted = 160

// clip cuts line to at most maxQuoted bytes around byte column col (0-based), on character
// boundaries, and returns the column within what it kept, "…" included. Only what it keeps is
// copied, so quoting a long line costs the same as quoting a short one.
func clip(line []byte, col int) (string, int) {
	if len(line) <= maxQuoted {
		return string(line), col
	}
	lo := max(0, min(col-maxQuoted/2, len(line)-maxQuoted))
	hi := min(len(line), lo+maxQuoted)
	for lo > 0 && !utf8.RuneStart(line[lo]) {
		lo--
	}
	for hi < len(line) && !utf8.RuneStart(line[hi]) {
		hi++
	}
	out, col := string(line[lo:hi]), col-lo
	if lo > 0 {
		out, col = "…"+out, col+len("…")
	}
	if hi < len(line) {
		out += "…"
	}
	return out, col
}

func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

// caretPad returns the blank prefix that puts a caret under byte column col of line, counting
// a tab as four columns like expandTabs does and each UTF-8 character as one.
func caretPad(line string, col int) string {
	var b strings.Builder
	for i := 0; i < col-1 && i < len(line); i++ {
		if line[i] == '\t' {
			b.WriteString("    ")
		} else if line[i]&0xC0 != 0x80 {
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

// unsafeRune reports whether r may change what a terminal shows, unless it is one of keep.
func unsafeRune(r rune, keep string) bool {
	return r == utf8.RuneError || unicode.IsControl(r) && !strings.ContainsRune(keep, r) ||
		r == 0x061c || r == 0x200e || r == 0x200f || 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069
}

// escape writes the unsafe characters of s as escapes, keeping those in keep.
func escape(s, keep string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unsafeRune(r, keep) }) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1 || r < 0x80 && unsafeRune(r, keep):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r != utf8.RuneError && unsafeRune(r, keep):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
