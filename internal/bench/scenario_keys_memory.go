package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// The keys scenario's memory rows: the server's Go heap and RSS holding
// n ready tasks, each of a key of its own or all without a key, so that
// the difference of the two rows of a round over n is the memory of a
// key with one ready task.

// Shape of the memory rows.
const (
	keysMemoryMax = 1_000_000 // most tasks (and keys) of a memory row
	// keysMemoryGOGC is the servers' GOGC in the memory rows: the heap
	// then holds at most a tenth more than what is live, so the
	// garbage of the fill moves a figure per key by a few bytes, not by
	// the whole live heap as at the default of 100.
	keysMemoryGOGC = "GOGC=10"
)

// keysMemory is a memory row: a server on the embedded store with
// keysMemoryGOGC, filled with n ready tasks of a 3-byte payload, each of
// key "k<i>" if keyed, else without a key, then at rest; it reports the
// server's Go heap (go_memstats_heap_alloc_bytes) and RSS, each over n.
func keysMemory(bin string, n int, keyed bool) (Result, error) {
	dir, err := os.MkdirTemp("", "hourglass-bench-keys-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	p := newServeProcess(bin, filepath.Join(dir, "data"))
	p.env = []string{keysMemoryGOGC}
	defer p.stop()
	if _, err := p.start(); err != nil {
		return Result{}, err
	}
	if err := keysMemoryFill(p, n, keyed); err != nil {
		return Result{}, err
	}
	if _, err := p.atRest(serveRestTimeout); err != nil {
		return Result{}, err
	}
	m, err := p.metrics("go_memstats_heap_alloc_bytes")
	if err != nil {
		return Result{}, p.withState(err)
	}
	var r Result
	heap := m["go_memstats_heap_alloc_bytes"]
	r.add("heap MiB", unitMiB, heap/(1<<20))
	r.add("heap B/task", unitBytes, heap/float64(n))
	if rss, err := p.rss(); err == nil {
		r.add("RSS MiB", unitMiB, float64(rss)/(1<<20))
		r.add("RSS B/task", unitBytes, float64(rss)/float64(n))
	}
	return r, nil
}

// keysMemoryFill puts n ready tasks into the keys queue by batches of
// workerBatch from workerFillers clients, each batch made as it goes:
// with 1M keys, bodies made in advance would hold 1M different tasks.
func keysMemoryFill(p *serveProcess, n int, keyed bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), fillTimeout(n))
	defer cancel()
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	for range workerFillers {
		wg.Go(func() {
			var b strings.Builder
			for {
				from := int(next.Add(workerBatch)) - workerBatch
				if from >= n {
					return
				}
				b.Reset()
				b.WriteString(`{"tasks":[`)
				for i := from; i < min(from+workerBatch, n); i++ {
					if i > from {
						b.WriteByte(',')
					}
					if keyed {
						fmt.Fprintf(&b, `{"payload":"p","key":"k%d"}`, i)
					} else {
						b.WriteString(`{"payload":"p"}`)
					}
				}
				b.WriteString(`]}`)
				if err := p.putBatch(ctx, keysQueue, []byte(b.String())); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return p.withState(fmt.Errorf("bench: keys: filling %d tasks: %w", n, firstErr))
	}
	return nil
}
