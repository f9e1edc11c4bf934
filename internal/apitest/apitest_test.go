package apitest_test

import (
	"testing"

	"github.com/hourglass-go/hourglass/internal/apitest"
)

// TestDocument checks that api/openapi.yaml loads and is valid OpenAPI
// 3.1, examples included.
func TestDocument(t *testing.T) {
	doc := apitest.Document(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
}
