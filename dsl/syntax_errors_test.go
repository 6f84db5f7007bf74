package dsl_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/chunktest"
)

// TestSyntaxErrors parses every chunk of testdata/errors/syntax.dag and checks that the
// diagnostics are exactly the ones its markers expect, at their lines and columns.
func TestSyntaxErrors(t *testing.T) {
	cases, err := chunktest.Read(filepath.Join("..", "testdata", "errors", "syntax.dag"))
	require.NoError(t, err)
	bad := 0
	for _, c := range cases {
		if len(c.Want) > 0 {
			bad++
		}
		t.Run(c.Name(), func(t *testing.T) {
			_, err := dsl.Parse(c.File, c.Src)
			chunktest.Check(t, err, c)
		})
	}
	require.GreaterOrEqual(t, bad, 12, "syntax.dag should keep at least a dozen broken inputs")
}

// TestSyntaxErrorsInBlocks checks that a broken statement inside a block, at any depth and
// wherever it stands in the block, gets the message and column it gets at the top level.
// Participle reports a statement that fails at its second token inside a block as the block's
// missing "}" at the statement's start; that must not reach the user.
func TestSyntaxErrorsInBlocks(t *testing.T) {
	cases := []struct {
		stmt string // a broken statement
		col  int    // 1-based column of the diagnostic in stmt
		want string // regexp the message matches
	}{
		{"for i32 in 0 .. 2 { }", 5, `^"i32" is a reserved keyword and cannot be used as a name`},
		{"op send = nop", 4, `^"send" is a reserved keyword`},
		{"let for = 1", 5, `^"for" is a reserved keyword`},
		{"var if = 1", 5, `^"if" is a reserved keyword`},
		{"def op(x) = x", 5, `^"op" is a reserved keyword`},
		{"buffer u8 u32[4]", 8, `^"u8" is a reserved keyword`},
		{"queue to to rank", 7, `^"to" is a reserved keyword`},
		{"plan for", 6, `^"for" is a reserved keyword`},
		{"param rank = 2", 7, `^"rank" is read-only`},
		{"if then { }", 4, `^expected an expression in the if statement, got "then"`},
		{"assert", 7, `^expected an expression in the assert statement, got end of line`},
		{"let", 4, `^expected a name in the let statement, got end of line`},
		{"queue q to", 11, `^expected an expression in the queue statement, got end of line`},
		{"x + 1", 3, `^expected "after" in a dependency statement`},
		{"buffer b u9[4]", 10, `^expected an element type`},
		{"let a = 1 let b = 2", 11, `^unexpected "let" after the let statement`},
		{"send q", 1, `^"send" is an operation, not a statement`},
		{"else { }", 1, `^"else" without an "if"`},
	}
	// Where the statement goes: %s is the statement; its line is the one with "%s".
	places := []struct{ name, src string }{
		{"top", "plan t\n%s\nlet z = 1\n"},
		{"top_between", "plan t\nlet a = 1\n%s\nlet z = 1\n"},
		{"depth1_alone", "plan t\nfor d in 0 .. 2 {\n  %s\n}\n"},
		{"depth1_first", "plan t\nfor d in 0 .. 2 {\n  %s\n  let z = 1\n}\n"},
		{"depth1_last", "plan t\nif ranks > 1 {\n  let a = 1\n  %s\n}\n"},
		{"depth2_alone", "plan t\nfor d in 0 .. 2 {\n  for e in 0 .. 2 {\n    %s\n  }\n}\n"},
		{"depth2_between", "plan t\nfor d in 0 .. 2 {\n  if d == 0 {\n    let a = 1\n    %s\n    let z = 1\n  }\n}\n"},
		{"depth2_else", "plan t\nif ranks > 1 {\n} else {\n  for d in 0 .. 2 {\n    %s\n  }\n}\n"},
	}
	// Only the first of two broken statements is reported.
	for _, src := range []string{
		"plan t\nfor d in 0 .. 2 {\n  let x =\n  let for = 1\n}\n",
		"plan t\nfor d in 0 .. 2 {\n  let x = 1 2\n  let for = 1\n}\n",
	} {
		_, err := dsl.Parse("p.dag", []byte(src))
		var errs diag.List
		require.ErrorAs(t, err, &errs)
		require.Len(t, errs, 1)
		require.Equal(t, 3, int(errs[0].Pos.Line), "%s\nsource:\n%s", errs[0].Msg, src)
	}
	for _, c := range cases {
		var top *diag.Diagnostic
		for _, p := range places {
			t.Run(c.stmt+"/"+p.name, func(t *testing.T) {
				src := fmt.Sprintf(p.src, c.stmt)
				line, indent := 0, 0
				for n, l := range strings.Split(src, "\n") {
					if strings.HasSuffix(l, c.stmt) {
						line, indent = n+1, len(l)-len(c.stmt)
					}
				}
				_, err := dsl.Parse("p.dag", []byte(src))
				var errs diag.List
				require.ErrorAs(t, err, &errs, "source:\n%s", src)
				require.Len(t, errs, 1, "source:\n%s", src)
				d := errs[0]
				require.Regexp(t, c.want, d.Msg, "source:\n%s", src)
				require.Equal(t, fmt.Sprintf("%d:%d", line, indent+c.col), fmt.Sprintf("%d:%d", d.Pos.Line, d.Pos.Col), "%s\nsource:\n%s", d.Msg, src)
				if top == nil {
					top = d
				}
				require.Equal(t, top.Msg, d.Msg, "the message differs from the top level's")
			})
		}
	}
}
