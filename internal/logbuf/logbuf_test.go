package logbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/hourglass-go/hourglass/internal/logbuf"
)

// TestBuffer: 8 goroutines logging 100 lines each leave 800 whole lines.
func TestBuffer(t *testing.T) {
	var b logbuf.Buffer
	log := b.Logger()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				log.Info("line", "k", "v")
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, "msg=line k=v") {
			t.Fatalf("line %q", l)
		}
	}
}
