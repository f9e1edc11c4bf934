package apitest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/internal/apitest"
)

// TestDocument_WireTypes checks that every struct type of package api that
// travels as JSON has a schema of its name in api/openapi.yaml with the
// same fields: a field added to a Go type (or dropped) fails here until
// the document says it too.
func TestDocument_WireTypes(t *testing.T) {
	doc := apitest.Document(t)
	structs := apiStructs(t)
	if len(structs) < 30 {
		t.Fatalf("found %d struct types in package api: is ../../api its directory?", len(structs))
	}
	for name, st := range structs {
		want := jsonFields(t, name, st, structs)
		if len(want) == 0 {
			continue // not a JSON object
		}
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Errorf("api.%s has no schema %s in api/openapi.yaml", name, name)
			continue
		}
		var got []string
		for p := range ref.Value.Properties {
			got = append(got, p)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has the properties %v; api.%s has the fields %v", name, got, name, want)
		}
	}
}

// apiStructs parses package api's files and returns its exported struct
// types by name.
func apiStructs(t *testing.T) map[string]*ast.StructType {
	t.Helper()
	names, err := filepath.Glob("../../api/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]*ast.StructType{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if st, ok := ts.Type.(*ast.StructType); ok {
					out[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	return out
}

// jsonFields returns the JSON names of st's fields, those of an embedded
// struct of the package included.
func jsonFields(t *testing.T, name string, st *ast.StructType, structs map[string]*ast.StructType) []string {
	var out []string
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				t.Fatalf("api.%s: tag %s: %v", name, f.Tag.Value, err)
			}
			tag, _, _ = strings.Cut(reflect.StructTag(s).Get("json"), ",")
		}
		if tag == "-" {
			continue
		}
		if len(f.Names) == 0 { // embedded
			if id, ok := f.Type.(*ast.Ident); ok && tag == "" && structs[id.Name] != nil {
				out = append(out, jsonFields(t, id.Name, structs[id.Name], structs)...)
			}
			continue
		}
		if tag != "" {
			out = append(out, tag)
		}
	}
	return out
}
