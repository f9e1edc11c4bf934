package broker

import (
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestKeyRate_Memory measures what a key's bucket of a per-key rate
// costs while it is not full (its keyRate, map entry and timer): 100,000
// keys each spent once under a rate of 1 an hour. The bound is loose, the
// figure is in the log.
func TestKeyRate_Memory(t *testing.T) {
	b, err := Open(memstore.New(), Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%07d", i)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.mu.Lock()
	q := b.queueLocked("q")
	q.policy = task.Policy{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: time.Hour, Burst: 1}}}
	b.mu.Unlock()
	before := heap()
	b.mu.Lock()
	mono := b.monoNow()
	for _, k := range keys {
		b.takeKeyTokenLocked(q, k, mono)
	}
	b.mu.Unlock()
	after := heap()
	per := float64(after-before) / n
	t.Logf("%d keys with a bucket each: %.0f bytes a key", n, per)
	if per > 400 {
		t.Errorf("%.0f bytes a key's bucket, over 400", per)
	}
	b.mu.Lock()
	b.dropKeyRatesLocked(q)
	b.mu.Unlock()
	if left := int64(heap()) - int64(before); left > 1<<20 {
		t.Errorf("%d bytes left after the buckets were dropped", left)
	}
}
