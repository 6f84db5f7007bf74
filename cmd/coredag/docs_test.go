package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
)

// The language reference, docs/language.md, shows complete plans in ```dag blocks. Each of them
// is a file under docs/examples: the plans that must be accepted directly in that directory, the
// ones that show a diagnostic in docs/examples/errors. An error example ends with directive
// comments that say how to run it and what coredag prints:
//
//	# args: compile            the command and flags, before the file (default: check)
//	# exit: 2                  the exit code (default: 1, diagnostics)
//	# want: NAME.dag:3:13: ... one line of the output (stderr), as printed from inside
//	                           docs/examples/errors; several # want lines for several lines
//
// Unless the # want lines quote source (a line followed by its caret), the quoted source lines
// and carets are left out of the comparison; the indented lines of related positions stay. The document shows the file without its directives in
// a ```dag block, immediately followed by a ```text block holding exactly the # want lines.
// These tests keep the three (document, files and coredag's actual output) in step.

const (
	docsExamples = "docs/examples"
	docsErrors   = "docs/examples/errors"
	docsLanguage = "docs/language.md"
)

// docExample is one example plan of the language reference.
type docExample struct {
	path string   // relative to the repository root
	body string   // the plan, without its directive lines
	args []string // the command and flags to run it with
	want []string // the expected output lines
	exit int      // the expected exit code
}

// isDirective reports whether a line is one of an example's closing directives.
func isDirective(l string) bool {
	for _, d := range []string{"# want: ", "# args: ", "# exit: "} {
		if strings.HasPrefix(l, d) {
			return true
		}
	}
	return false
}

// readDocExamples reads the .dag files of dir (relative to the repository root).
func readDocExamples(t *testing.T, dir string) []docExample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.dag"))
	require.NoError(t, err)
	require.NotEmpty(t, files, dir)
	var out []docExample
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(string(src), "\n"), "%s must end with a newline", f)
		lines := strings.Split(strings.TrimSuffix(string(src), "\n"), "\n")
		ex := docExample{path: filepath.ToSlash(filepath.Join(dir, filepath.Base(f))), args: []string{"check"}, exit: exitFail}
		end := len(lines)
		for end > 0 && isDirective(lines[end-1]) {
			end--
		}
		for i, l := range lines {
			switch {
			case i < end:
				require.False(t, isDirective(l),
					"%s:%d: directives go after the plan, at the end of the file", f, i+1)
			case strings.HasPrefix(l, "# args: "):
				ex.args = strings.Fields(strings.TrimPrefix(l, "# args: "))
			case strings.HasPrefix(l, "# exit: "):
				ex.exit, err = strconv.Atoi(strings.TrimPrefix(l, "# exit: "))
				require.NoError(t, err, "%s:%d", f, i+1)
			default:
				ex.want = append(ex.want, strings.TrimPrefix(l, "# want: "))
			}
		}
		ex.body = strings.Join(lines[:end], "\n") + "\n"
		out = append(out, ex)
	}
	return out
}

// TestDocsExamplesAreValid: every complete plan of the reference is accepted, runs on the
// software NIC with memory equal to the serial reference, and is already formatted.
func TestDocsExamplesAreValid(t *testing.T) {
	t.Parallel()
	for _, ex := range readDocExamples(t, docsExamples) {
		t.Run(filepath.Base(ex.path), func(t *testing.T) {
			require.Empty(t, ex.want, "a plan with # want lines belongs in %s", docsErrors)
			path := filepath.Join(repoRoot, ex.path)
			code, _, stderr := coredagIn(t, "", "check", path)
			require.Equal(t, exitOK, code, stderr)
			code, _, stderr = coredagIn(t, "", "run", "--iters", "2", path)
			assert.Equal(t, exitOK, code, stderr)

			f, err := dsl.Parse(ex.path, []byte(ex.body))
			require.NoError(t, err)
			assert.Equal(t, ex.body, string(dsl.Format(f)), "run coredag fmt -w %s", ex.path)
		})
	}
}

// TestDocsErrorExamples: every diagnostic example prints exactly its # want lines and exits with
// its code.
func TestDocsErrorExamples(t *testing.T) {
	t.Parallel()
	for _, ex := range readDocExamples(t, docsErrors) {
		t.Run(filepath.Base(ex.path), func(t *testing.T) {
			require.NotEmpty(t, ex.want, "%s needs # want lines", ex.path)
			code, _, stderr := coredagIn(t, "", append(ex.args, filepath.Join(repoRoot, ex.path))...)
			assert.Equal(t, ex.exit, code, stderr)
			assert.NotContains(t, stderr, "panic")
			got := strings.Split(strings.TrimSuffix(strings.ReplaceAll(stderr, filepath.Join(repoRoot, docsErrors)+"/", ""), "\n"), "\n")
			if !quotesSource(ex.want) {
				kept := got[:0]
				for i := 0; i < len(got); i++ {
					if i+1 < len(got) && strings.TrimSpace(got[i+1]) == "^" { // a quoted line and its caret
						i++
						continue
					}
					kept = append(kept, got[i])
				}
				got = kept
			}
			assert.Equal(t, strings.Join(ex.want, "\n"), strings.Join(got, "\n"),
				"%s: the output changed; update its # want lines and the quote in %s", ex.path, docsLanguage)
		})
	}
}

// TestDocsErrorExampleCodes: every diagnostic of an error example has the code of its family,
// which is the start of the example's name (docs/language.md, Reading a diagnostic).
func TestDocsErrorExampleCodes(t *testing.T) {
	t.Parallel()
	family := map[string]diag.Code{
		"syntax": diag.Syntax, "names": diag.Name, "expr": diag.Expr, "shape": diag.Shape, "access": diag.Access,
		"match": diag.Match, "cycle": diag.Cycle, "fifo": diag.Deadlock, "race": diag.Race, "expect": diag.Expect, "assert": diag.Assert, "limit": diag.Limit, "target": diag.Target,
	}
	for _, ex := range readDocExamples(t, docsErrors) {
		if ex.exit != exitFail {
			continue // a usage error: no diagnostics
		}
		t.Run(filepath.Base(ex.path), func(t *testing.T) {
			prefix, _, _ := strings.Cut(filepath.Base(ex.path), "_")
			want, ok := family[prefix]
			require.True(t, ok, "%s: name it after its family (%v)", ex.path, family)
			args := append([]string{ex.args[0], "--json"}, ex.args[1:]...)
			if ex.args[0] == "compile" {
				args = append([]string{"compile", "--format", "json"}, ex.args[1:]...)
			}
			_, stdout, _ := coredagIn(t, "", append(args, filepath.Join(repoRoot, ex.path))...)
			var r checkReport
			if strings.HasPrefix(strings.TrimSpace(stdout), "[") {
				var rs []checkReport
				require.NoError(t, json.Unmarshal([]byte(stdout), &rs), stdout)
				require.Len(t, rs, 1)
				r = rs[0]
			} else {
				require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
			}
			require.NotEmpty(t, r.Diagnostics)
			for _, d := range r.Diagnostics {
				assert.Equal(t, want, d.Code, "%s:%d:%d: %s", d.File, d.Line, d.Col, d.Message)
			}
		})
	}
}

func quotesSource(want []string) bool {
	for _, l := range want {
		if strings.TrimSpace(l) == "^" {
			return true
		}
	}
	return false
}

// fence is a fenced code block of a Markdown file.
type fence struct {
	info string // the word after the opening ```
	text string // the lines inside, each ending with a newline
	line int    // of the opening ```, 1-based
	next *fence // the block that immediately follows this one, if any
}

// fences returns the fenced code blocks of a Markdown text.
func fences(t *testing.T, md string) []*fence {
	t.Helper()
	lines := strings.Split(md, "\n")
	var out []*fence
	prevEnd := -2
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		f := &fence{info: strings.TrimSpace(strings.TrimPrefix(lines[i], "```")), line: i + 1}
		start := i
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			f.text += lines[i] + "\n"
		}
		require.Less(t, i, len(lines), "%s:%d: unclosed code block", docsLanguage, f.line)
		if len(out) > 0 && prevEnd == start-1 {
			out[len(out)-1].next = f
		}
		prevEnd = i
		out = append(out, f)
	}
	return out
}

// TestDocsLanguageQuotesExamples: the ```dag blocks of the reference are exactly the example
// files, and each error example's block is followed by the output its # want lines expect.
func TestDocsLanguageQuotesExamples(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(filepath.Join("..", "..", docsLanguage))
	require.NoError(t, err)
	examples := append(readDocExamples(t, docsExamples), readDocExamples(t, docsErrors)...)
	byBody := map[string]*docExample{}
	for i := range examples {
		ex := &examples[i]
		if prev := byBody[ex.body]; prev != nil {
			t.Fatalf("%s and %s are the same plan", prev.path, ex.path)
		}
		byBody[ex.body] = ex
	}
	shown := map[string]bool{}
	for _, f := range fences(t, string(md)) {
		if f.info != "dag" {
			continue
		}
		ex := byBody[f.text]
		if !assert.NotNil(t, ex, "%s:%d: a ```dag block must be one of the plans under %s (write fragments in plain ``` blocks)",
			docsLanguage, f.line, docsExamples) {
			continue
		}
		assert.False(t, shown[ex.path], "%s:%d: %s is shown twice", docsLanguage, f.line, ex.path)
		shown[ex.path] = true
		if len(ex.want) == 0 {
			continue
		}
		want := strings.Join(ex.want, "\n") + "\n"
		if assert.NotNil(t, f.next, "%s:%d: follow %s with a ```text block of its output", docsLanguage, f.line, ex.path) {
			assert.Equal(t, "text", f.next.info, "%s:%d", docsLanguage, f.next.line)
			assert.Equal(t, want, f.next.text, "%s:%d: the output quoted for %s", docsLanguage, f.next.line, ex.path)
		}
	}
	for _, ex := range examples {
		assert.True(t, shown[ex.path], "%s is not shown in %s", ex.path, docsLanguage)
	}
}
