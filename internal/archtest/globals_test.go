package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoTestWritesAPackageVariable: settings are options passed in, never package variables
// that a test lowers, so tests can run side by side. A test that assigns to (or increments) a
// package-level variable of the project, its own package's or another's through its import, fails
// here with the position.
func TestNoTestWritesAPackageVariable(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	vars := map[string]map[string]bool{} // package directory, from root -> its package-level vars
	var tests []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(p, "_test.go"):
			tests = append(tests, p)
		case strings.HasSuffix(p, ".go"):
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			dir, _ := filepath.Rel(root, filepath.Dir(p))
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, s := range g.Specs {
						for _, n := range s.(*ast.ValueSpec).Names {
							if n.Name != "_" {
								if vars[dir] == nil {
									vars[dir] = map[string]bool{}
								}
								vars[dir][n.Name] = true
							}
						}
					}
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, vars, "no package variables found: the walk is broken")

	var found []string
	for _, p := range tests {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0) // resolves the names declared in the file
		require.NoError(t, err)
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		own := !strings.HasSuffix(f.Name.Name, "_test") // an internal test sees its package's vars
		imported := map[string]string{}                 // import name -> package directory
		for _, im := range f.Imports {
			ip := strings.Trim(im.Path.Value, `"`)
			if ip != module && !strings.HasPrefix(ip, module+"/") {
				continue
			}
			name := path.Base(ip)
			if im.Name != nil {
				name = im.Name.Name
			}
			imported[name] = strings.TrimPrefix(strings.TrimPrefix(ip, module), "/")
			if imported[name] == "" {
				imported[name] = "."
			}
		}
		written := func(x ast.Expr, at token.Pos) {
			switch x := x.(type) {
			case *ast.Ident: // unresolved in the file: declared at package level, or a universe name
				if own && x.Obj == nil && vars[dir][x.Name] {
					found = append(found, fset.Position(at).String()+": "+x.Name)
				}
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Obj == nil {
					if pkg, ok := imported[id.Name]; ok && vars[pkg][x.Sel.Name] {
						found = append(found, fset.Position(at).String()+": "+id.Name+"."+x.Sel.Name)
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch s := n.(type) {
			case *ast.AssignStmt:
				if s.Tok != token.DEFINE {
					for _, l := range s.Lhs {
						written(l, s.Pos())
					}
				}
			case *ast.IncDecStmt:
				written(s.X, s.Pos())
			}
			return true
		})
	}
	assert.Empty(t, found, "tests write package variables: make them options passed in")
}
