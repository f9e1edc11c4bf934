package hourglass_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSource_NoRuntimeHacks checks that the library relies only on what
// Go supports: no go:linkname into the runtime (procPin can change with
// any release), no package unsafe, and no parsing of runtime.Stack to
// learn a goroutine's id. Stop and the choice of shard used both.
func TestSource_NoRuntimeHacks(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{".", "queue"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, cg := range f.Comments {
				for _, c := range cg.List {
					if strings.HasPrefix(c.Text, "//go:linkname") {
						t.Errorf("%s: %s", fset.Position(c.Pos()), c.Text)
					}
				}
			}
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == "unsafe" {
					t.Errorf("%s: imports unsafe", fset.Position(imp.Pos()))
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "runtime" && sel.Sel.Name == "Stack" {
						t.Errorf("%s: runtime.Stack", fset.Position(sel.Pos()))
					}
				}
				return true
			})
		}
	}
}
