package e2e_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPI_Served fetches GET /v1/openapi.json from a server with a
// token, without the token, and checks that it is a valid OpenAPI 3.1
// document of the API, served as JSON, whose routes include the ones a
// client calls.
func TestOpenAPI_Served(t *testing.T) { engines(t, testOpenAPI_Served) }

func testOpenAPI_Served(t *testing.T) {
	t.Parallel()
	s := startServer(t, withToken("t0ken"))
	a := s.callAuth("GET", "/v1/openapi.json", "", "")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json without the token: %v (%q)", a, a.header.Get("Content-Type"))
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(a.body)
	if err != nil {
		t.Fatalf("the document served does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document served is not valid OpenAPI: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	for path, method := range map[string]string{
		"/v1/queues/{queue}/tasks":   "POST",
		"/v1/queues/{queue}/reserve": "POST",
		"/v1/openapi.json":           "GET",
	} {
		if item := doc.Paths.Value(path); item == nil || item.GetOperation(method) == nil {
			t.Errorf("the document served has no %s %s", method, path)
		}
	}
	// The rest of /v1 still needs the token.
	if a := s.callAuth("GET", "/v1/queues", "", ""); a.status != http.StatusUnauthorized {
		t.Errorf("GET /v1/queues without the token: %v, want 401", a)
	}
}
