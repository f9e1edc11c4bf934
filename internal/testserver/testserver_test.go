package testserver_test

import (
	"net/http"
	"testing"

	"github.com/hourglass-go/hourglass/internal/testserver"
)

// TestStart: a server on a memory store and one on a Pebble store each
// answer the API, and Close stops them.
func TestStart(t *testing.T) {
	for _, o := range []testserver.Options{{}, {Dir: t.TempDir()}} {
		s, err := testserver.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(s.URL + "/v1/queues")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /v1/queues (dir %q): %d", o.Dir, resp.StatusCode)
		}
		s.Close()
		if _, err := http.Get(s.URL + "/v1/queues"); err == nil {
			t.Errorf("the server answers after Close")
		}
	}
}
