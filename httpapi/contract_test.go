package httpapi_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/hourglass-go/hourglass/httpapi"
	"github.com/hourglass-go/hourglass/internal/apitest"
)

// contracts maps each Server made by the tests' constructors (newServer,
// newLive, newObserved, newHistoryServer) to the apitest.Validator of its
// test: do and observed.serve pass the requests they serve on it, and
// the answers, through the validator, so that every exchange of these
// tests is checked against api/openapi.yaml.
var contracts sync.Map // *httpapi.Server → *apitest.Validator

// checked registers s for the checks of t's exchanges, and returns it.
func checked(t testing.TB, s *httpapi.Server) *httpapi.Server {
	contracts.Store(s, apitest.New(t))
	t.Cleanup(func() { contracts.Delete(s) })
	return s
}

// contract returns h behind its test's validator if it is a checked
// server, h itself otherwise.
func contract(h http.Handler) http.Handler {
	if v, ok := contracts.Load(h); ok {
		return v.(*apitest.Validator).Handler(h)
	}
	return h
}
