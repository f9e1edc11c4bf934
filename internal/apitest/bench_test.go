package apitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/internal/apitest"
)

// BenchmarkValidator_Check_Put measures one checked exchange: a put and
// its 201 Task.
func BenchmarkValidator_Check_Put(b *testing.B) {
	h := apitest.New(b).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, task)
	}))
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/queues/q/tasks", strings.NewReader(`{"id":"a","delay":"1s"}`))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}
