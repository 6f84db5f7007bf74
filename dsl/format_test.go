package dsl

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

var update = flag.Bool("update", false, "rewrite the formatter's golden files under testdata/fmt/golden")

// repoRoot is the module root, seen from this package's directory.
const repoRoot = ".."

// goldenDir holds one golden file per formatted input, mirroring the input's path.
var goldenDir = filepath.Join(repoRoot, "testdata", "fmt", "golden")

// dagFiles lists every .dag file under plans/ and testdata/ (recursively, so new plans are
// covered without touching this test), as slash paths relative to the module root.
func dagFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, dir := range []string{"plans", "testdata"} {
		root := filepath.Join(repoRoot, dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".dag") {
				rel, err := filepath.Rel(repoRoot, path)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return files
}

// isErrorFile reports whether a .dag file is a chunked error file (expected not to parse, or
// not to check): those live under an errors/ directory or carry ### markers.
func isErrorFile(rel string, src []byte) bool {
	return strings.Contains("/"+rel, "/errors/") || bytes.Contains(src, []byte(`### "`)) ||
		bytes.Contains(src, []byte("\n---\n"))
}

func TestFormatGolden(t *testing.T) {
	files := dagFiles(t)
	require.NotEmpty(t, files)
	formatted := 0
	for _, rel := range files {
		t.Run(rel, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(repoRoot, rel))
			require.NoError(t, err)
			if isErrorFile(rel, src) {
				t.Skip("chunked error file")
			}
			f, err := Parse(rel, src)
			require.NoError(t, err, "every plan and test input outside errors/ must parse")
			got := Format(f)
			checkRoundTrip(t, rel, f, got)

			golden := filepath.Join(goldenDir, filepath.FromSlash(rel)+".golden")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "missing golden file: run go test ./dsl -run TestFormatGolden -update")
			assert.Equal(t, string(want), string(got))
			formatted++
		})
	}
	t.Logf("formatted %d files", formatted)
}

// checkRoundTrip asserts that out, the formatting of f, parses to the same AST with the same
// comments, and formats to itself.
func checkRoundTrip(t *testing.T, name string, f *File, out []byte) {
	t.Helper()
	g, err := Parse(name, out)
	require.NoError(t, err, "formatted output does not parse:\n%s", out)
	assert.Empty(t, cmp.Diff(f, g, sameSyntax), "parse(format(x)) differs from parse(x):\n%s", out)
	require.Equal(t, commentTexts(f), commentTexts(g), "comments lost or changed")
	assert.Equal(t, string(out), string(Format(g)), "format is not idempotent")
}

// sameSyntax compares two ASTs by structure and values: positions and comments (checked apart)
// are ignored, and a nil list equals an empty one.
var sameSyntax = cmp.Options{cmpopts.IgnoreTypes(diag.Pos{}, Span{}, []*Comment(nil)), cmpopts.EquateEmpty()}

func commentTexts(f *File) []string {
	out := make([]string, len(f.Comments))
	for i, c := range f.Comments {
		out[i] = strings.TrimRight(c.Text, " \t\r\f\v")
	}
	return out
}

func TestFormatCases(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"separators", "let a = 1;let b=2 ;; let c = 3\n", "let a = 1\nlet b = 2\nlet c = 3\n"},
		{"blank runs", "\n\n\nlet a = 1\n\n\n\nlet b = 2\n\n\n", "let a = 1\n\nlet b = 2\n"},
		{"trailing run", "let a = 1 # x\nlet bbb = 22 # y\n\nlet c = 3 # z\n",
			"let a   = 1  # x\nlet bbb = 22 # y\n\nlet c = 3 # z\n"},
		{"aligned declarations", "op tx[s]=send q d\nop red[s] = nop\nx after y\nop a = nop\nbuffer data f32[4]\nbuffer t u8[1]\nqueue right to 1\nqueue l to 0\n",
			"op tx[s]  = send q d\nop red[s] = nop\nx after y\nop a = nop\nbuffer data f32[4]\nbuffer t    u8[1]\nqueue right to 1\nqueue l     to 0\n"},
		{"one-line blocks stay", "if s > 0 { a after b }\nif s == 0 { a after b } else { c after d }\nfor i in 0 .. 2 { op x[i] = nop }\n",
			"if s > 0 { a after b }\nif s == 0 { a after b } else { c after d }\nfor i in 0 .. 2 { op x[i] = nop }\n"},
		{"one-line blocks with blocks inside split", "if a { if b { x after y } }\nif a { x after y } else if b { x after z }\nif a { op x = nop # c\n}\n",
			"if a {\n  if b { x after y }\n}\nif a {\n  x after y\n} else if b {\n  x after z\n}\nif a {\n  op x = nop # c\n}\n"},
		{"extern", "buffer d  f32[n]   extern\tremote_write  init 1\nbuffer tmp f32[n]\n",
			"buffer d   f32[n] extern remote_write init 1\nbuffer tmp f32[n]\n"},
		{"parens kept", "let a = ((1+2))*3\n", "let a = ((1 + 2)) * 3\n"},
		{"numbers raw", "let a = 0x2A+1_000+4KiB\n", "let a = 0x2A + 1_000 + 4KiB\n"},
		{"newline in brackets", "let a = min(1,\n  2)\n", "let a = min(1, 2)\n"},
		{"comment inside statement", "let a = (1 + # one\n 2)\n", "# one\nlet a = (1 + 2)\n"},
		{"else on next line", "if x {\n} \n else {\n}\n", "if x {\n} else {\n}\n"},
		{"block blank edges", "for i in 0..2 {\n\n  op a[i] = nop\n\n}\n", "for i in 0 .. 2 {\n  op a[i] = nop\n}\n"},
		{"unary chain", "let a = - -1 + !!b\n", "let a = - -1 + ! !b\n"},
		{"crlf", "let a = 1 # c\r\nlet b = 2\r\n", "let a = 1 # c\nlet b = 2\n"},
		{"tables", "let t=[ f(j)for j in 0..n step 2 if j%3!=0 ]\nlet u = [1,2 ,\n 3]\nlet v = [ ]\nlet x = t[u[0]+1]*2\n",
			"let t = [f(j) for j in 0 .. n step 2 if j % 3 != 0]\nlet u = [1, 2, 3]\nlet v = []\nlet x = t[u[0] + 1] * 2\n"},
		{"soft keywords as names", "param depth=4\nlet step = depth\nqueue q to 1 depth depth\nfor i in 0 .. 4 step step { op x[i] = nop }\n",
			"param depth = 4\nlet step = depth\nqueue q to 1 depth depth\nfor i in 0 .. 4 step step { op x[i] = nop }\n"},
		{"paired lists", "op r = reduce sum {a[j] for j in 0..4},b[0:1] from c[0:5]\nop c = copy x[0:2] , x[4:6] to {y[k*2 : k*2+2] for k in 0..2 if k>=0}\n",
			"op r = reduce sum {a[j] for j in 0 .. 4}, b[0:1] from c[0:5]\nop c = copy x[0:2], x[4:6] to {y[k * 2 : k * 2 + 2] for k in 0 .. 2 if k >= 0}\n"},
		{"empty", "", ""},
		{"only comment", "# just this", "# just this\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("c.dag", []byte(tt.src))
			require.NoError(t, err)
			got := Format(f)
			assert.Equal(t, tt.want, string(got))
			checkRoundTrip(t, "c.dag", f, got)
		})
	}
}

// TestFormatHandBuilt checks that a tree built in code, without parentheses, prints so that it
// parses back to the same tree.
func TestFormatHandBuilt(t *testing.T) {
	id := func(s string) *Ident { return &Ident{Name: s} }
	num := func(s string, v int64) *IntLit { return &IntLit{Raw: s, Value: v} }
	bin := func(op string, x, y Expr) *BinaryExpr { return &BinaryExpr{Op: op, X: x, Y: y} }
	tests := []struct {
		x    Expr
		want string
	}{
		{bin("*", bin("+", id("a"), id("b")), id("c")), "(a + b) * c"},
		{bin("-", id("a"), bin("-", id("b"), id("c"))), "a - (b - c)"},
		{bin("**", bin("**", id("a"), id("b")), id("c")), "(a ** b) ** c"},
		{bin("**", id("a"), bin("**", id("b"), id("c"))), "a ** b ** c"},
		{&UnaryExpr{Op: "-", X: bin("+", id("a"), num("1", 1))}, "-(a + 1)"},
		{&UnaryExpr{Op: "-", X: bin("**", id("a"), num("2", 2))}, "-a ** 2"},
		{bin("**", &UnaryExpr{Op: "-", X: id("a")}, num("2", 2)), "(-a) ** 2"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			f := &File{Stmts: []Stmt{&LetStmt{Name: id("x"), Value: tt.x}}}
			out := Format(f)
			assert.Equal(t, "let x = "+tt.want+"\n", string(out))
			g, err := Parse("h.dag", out)
			require.NoError(t, err)
			v := g.Stmts[0].(*LetStmt).Value
			if p, ok := v.(*ParenExpr); ok && !strings.HasPrefix(tt.want, "(") {
				v = p.X
			}
			assert.Equal(t, stripParens(tt.x), stripParens(v))
		})
	}
}

// stripParens renders an expression's structure without ParenExpr nodes.
func stripParens(e Expr) string {
	switch e := e.(type) {
	case *ParenExpr:
		return stripParens(e.X)
	case *UnaryExpr:
		return "(" + e.Op + stripParens(e.X) + ")"
	case *BinaryExpr:
		return "(" + stripParens(e.X) + " " + e.Op + " " + stripParens(e.Y) + ")"
	}
	return sexpr(e)
}

func FuzzParse(f *testing.F) {
	for _, rel := range dagFiles(f) {
		src, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
		for _, chunk := range bytes.Split(src, []byte("\n---\n")) {
			f.Add(chunk)
		}
	}
	f.Add([]byte("let x = ((((1"))
	f.Add([]byte("op a = atomic cas q x -1 2 ** 3 to y"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("fuzz.dag", src)
		if err != nil {
			list, ok := err.(diag.List)
			require.True(t, ok, "Parse must return a diag.List, got %T", err)
			require.NotEmpty(t, list)
			for _, e := range list {
				require.True(t, e.Pos.IsValid(), "diagnostic without a position: %v", e)
			}
			return
		}
		checkRoundTrip(t, "fuzz.dag", file, Format(file))
	})
}
