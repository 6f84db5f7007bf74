// Package chunktest reads chunked error files and checks diagnostics against them.
//
// A chunked file holds many small inputs separated by lines that are exactly "---". A line that
// should get a diagnostic ends with one or more markers, each a comment of the form
//
//	### "regexp"        a diagnostic on this line whose message matches regexp
//	### 17 "regexp"     the same, at 1-based byte column 17
//
// The message a pattern sees is the diagnostic as printed without the quoted source: its
// message with the rank suffix, then a line "\n    file:line:col: label" per related position.
//
// where regexp is a Go-quoted string (so "\\[" or a raw `[` inside a character class). Markers
// are ordinary comments to the .dag lexer, so a chunk can be fed to the tools unchanged. Each
// Case's source is padded with blank lines, so the positions a tool reports are lines and
// columns of the whole file. Check asserts that every expected diagnostic appears and that no
// other one does; ParseOutput lets a CLI test apply the same expectations to printed output.
package chunktest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coredag/coredag/diag"
)

// Want is one expected diagnostic.
type Want struct {
	Line    int            // 1-based line in the whole file
	Col     int            // 1-based byte column; 0 accepts any column
	Pattern string         // the regexp as written
	Re      *regexp.Regexp // compiled Pattern, matched against the diagnostic's message
}

// String formats w as line:col: /pattern/ for failure messages.
func (w Want) String() string {
	if w.Col == 0 {
		return fmt.Sprintf("%d: /%s/", w.Line, w.Pattern)
	}
	return fmt.Sprintf("%d:%d: /%s/", w.Line, w.Col, w.Pattern)
}

// Matches reports whether diagnostic e satisfies w: its position, and its text (see Text).
func (w Want) Matches(e *diag.Diagnostic) bool {
	return int(e.Pos.Line) == w.Line && (w.Col == 0 || int(e.Pos.Col) == w.Col) && w.Re.MatchString(Text(e))
}

// Text is what a pattern is matched against: the message as printed, with its rank suffix,
// then one line per related position as diag.Print writes it ("\n    file:line:col: label").
func Text(e *diag.Diagnostic) string {
	var b strings.Builder
	b.WriteString(e.Text())
	for _, r := range e.Related {
		b.WriteString("\n    " + r.Pos.String() + ": " + r.Label)
	}
	return b.String()
}

// Case is one chunk of a chunked file.
type Case struct {
	File  string // the chunked file's name, as given to Read or Parse
	Index int    // 0-based chunk number
	Line  int    // line of the chunk's first line in the file
	Src   []byte // the chunk, preceded by Line-1 blank lines
	Want  []Want // expected diagnostics in line order; empty for a chunk that must be clean
}

// Name identifies the case as file:line, usable as a subtest name.
func (c Case) Name() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

// Read reads the chunked file at path.
func Read(path string) ([]Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse splits data, the text of the chunked file filename, into cases. A malformed marker is
// an error naming its line.
func Parse(filename string, data []byte) ([]Case, error) {
	var (
		cases []Case
		cur   = Case{File: filename, Line: 1}
		body  bytes.Buffer
		line  int
	)
	finish := func() {
		cur.Src = append(bytes.Repeat([]byte("\n"), cur.Line-1), body.Bytes()...)
		cases = append(cases, cur)
		body.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimRight(text, "\r") == "---" {
			finish()
			cur = Case{File: filename, Index: len(cases), Line: line + 1}
			continue
		}
		wants, err := markers(text, line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", filename, line, err)
		}
		cur.Want = append(cur.Want, wants...)
		body.WriteString(text)
		body.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", filename, err)
	}
	finish()
	return cases, nil
}

// markers parses the ### markers at the end of one line.
func markers(text string, line int) ([]Want, error) {
	i := strings.Index(text, "###")
	if i < 0 {
		return nil, nil
	}
	var wants []Want
	rest := text[i:]
	for rest != "" {
		if !strings.HasPrefix(rest, "###") {
			return nil, fmt.Errorf("expected another ### marker, found %q", rest)
		}
		rest = strings.TrimLeft(rest[3:], " \t")
		w := Want{Line: line}
		if j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); j > 0 {
			col, err := strconv.Atoi(rest[:j])
			if err != nil || col < 1 {
				return nil, fmt.Errorf("bad column in marker: %q", rest[:j])
			}
			w.Col = col
			rest = strings.TrimLeft(rest[j:], " \t")
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil, fmt.Errorf(`marker needs a Go-quoted regexp, as in ### "unknown buffer": %q`, rest)
		}
		w.Pattern, _ = strconv.Unquote(q)
		if w.Re, err = regexp.Compile(w.Pattern); err != nil {
			return nil, fmt.Errorf("bad regexp in marker: %v", err)
		}
		wants = append(wants, w)
		rest = strings.TrimLeft(rest[len(q):], " \t\r")
	}
	return wants, nil
}

// Diagnostics returns the diagnostics in err: the entries of a diag.List, a single
// *diag.Diagnostic, or nothing for nil. Any other error is returned as the second result.
func Diagnostics(err error) ([]*diag.Diagnostic, error) {
	switch e := err.(type) {
	case nil:
		return nil, nil
	case diag.List:
		return e, nil
	case *diag.Diagnostic:
		return []*diag.Diagnostic{e}, nil
	}
	return nil, err
}

// Check asserts that got, the error a tool returned for c.Src, holds exactly the diagnostics
// c expects: each Want matched by a distinct diagnostic, and no diagnostic left over.
func Check(t testing.TB, got error, c Case) {
	t.Helper()
	diags, other := Diagnostics(got)
	if other != nil {
		t.Errorf("%s: got a non-diagnostic error: %v", c.Name(), other)
		return
	}
	for _, msg := range Mismatches(diags, c) {
		t.Errorf("%s: %s", c.Name(), msg)
	}
}

// Mismatches compares diagnostics with c's expectations and describes every expected
// diagnostic that is missing and every diagnostic that was not expected; nil means they agree.
func Mismatches(diags []*diag.Diagnostic, c Case) []string {
	used := make([]bool, len(diags))
	var out []string
	for _, w := range c.Want {
		found := false
		for i, d := range diags {
			if !used[i] && w.Matches(d) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			msg := "missing diagnostic " + w.String()
			if near := onLine(diags, w.Line); near != "" {
				msg += "; on that line got: " + near
			}
			out = append(out, msg)
		}
	}
	for i, d := range diags {
		if !used[i] {
			out = append(out, fmt.Sprintf("unexpected diagnostic %d:%d: %s", d.Pos.Line, d.Pos.Col, Text(d)))
		}
	}
	return out
}

func onLine(diags []*diag.Diagnostic, line int) string {
	var s []string
	for _, d := range diags {
		if int(d.Pos.Line) == line {
			s = append(s, fmt.Sprintf("%d:%d: %s", d.Pos.Line, d.Pos.Col, Text(d)))
		}
	}
	return strings.Join(s, " | ")
}

// diagLine matches a printed diagnostic: file:line:col: message (file may contain colons), and
// relatedLine one of its related positions, indented by four spaces.
var (
	diagLine    = regexp.MustCompile(`^(.*?):(\d+):(\d+): (.*)$`)
	relatedLine = regexp.MustCompile(`^    (\S.*?):(\d+):(\d+): (.*)$`)
)

// ParseOutput extracts the diagnostics from the printed output of a tool (such as coredag
// check), which prints each as file:line:col: message, possibly followed by the quoted source
// line and a caret, then its related positions (all indented, so never mistaken for a
// diagnostic).
func ParseOutput(output string) []*diag.Diagnostic {
	var out []*diag.Diagnostic
	lines := strings.Split(output, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r")
		if i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "^" { // a quoted source line and its caret
			i++
			continue
		}
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			if m := relatedLine.FindStringSubmatch(l); m != nil && len(out) > 0 {
				out[len(out)-1].Relate(diag.At(m[1], atoi(m[2]), atoi(m[3])), m[4])
			}
			continue
		}
		m := diagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		out = append(out, &diag.Diagnostic{Pos: diag.At(m[1], atoi(m[2]), atoi(m[3])), Msg: m[4]})
	}
	return out
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
