package httpapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/internal/apitest"
)

// TestOpenAPIRoutes checks that api/openapi.yaml lists exactly the routes
// the server's mux registers (Server.handle keeps every pattern): each
// "METHOD /path" pattern is one operation of the document and each
// operation one pattern. A pattern without a method must be a catch-all
// ("/", "/v1/") or the 405 of a path that has routes.
func TestOpenAPIRoutes(t *testing.T) {
	doc := apitest.Document(t)
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	served := map[string]bool{}
	paths := map[string]bool{}
	var methodless []string
	for _, p := range s.patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			methodless = append(methodless, p)
			continue
		}
		served[method+" "+path] = true
		paths[path] = true
	}
	for _, p := range methodless {
		if p != "/" && p != "/v1/" && !paths[p] {
			t.Errorf("the mux answers every method on %q, which has no route", p)
		}
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for _, r := range sortedKeys(served) {
		if !documented[r] {
			t.Errorf("the server registers %s, which api/openapi.yaml does not document", r)
		}
	}
	for _, r := range sortedKeys(documented) {
		if !served[r] {
			t.Errorf("api/openapi.yaml documents %s, which the server does not register", r)
		}
	}
	if len(served) < 30 {
		t.Errorf("only %d routes registered: is Server.handle still used for every route?", len(served))
	}
}

// TestOpenAPIRoutes_OneWayIn checks that the package registers routes on
// its mux only through Server.handle, which TestOpenAPIRoutes sees: a call
// of mux.Handle or mux.HandleFunc anywhere else would add a route that
// test cannot list.
func TestOpenAPIRoutes_OneWayIn(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Name.Name == "handle" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc" {
					return true
				}
				if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "mux" {
					t.Errorf("%s: %s registers on the mux without Server.handle", fset.Position(sel.Pos()), fn.Name.Name)
				}
				return true
			})
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestOpenAPIServed checks that GET /v1/openapi.json answers the embedded
// document as JSON, equal to the YAML, without the token and before the
// service is ready.
func TestOpenAPIServed(t *testing.T) {
	s := New(Options{Token: "secret", Logger: slog.New(slog.DiscardHandler)})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	var served, want any
	if err := json.Unmarshal(w.Body.Bytes(), &served); err != nil {
		t.Fatalf("the answer is not JSON: %v", err)
	}
	if err := yaml.Unmarshal([]byte(api.OpenAPI), &want); err != nil {
		t.Fatal(err)
	}
	// The YAML's numbers and strings as JSON reads them.
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(served, want) {
		t.Errorf("GET /v1/openapi.json differs from api/openapi.yaml")
	}
	if v, _ := served.(map[string]any)["openapi"].(string); v != "3.1.0" {
		t.Errorf("openapi %q", v)
	}
}
