package pebblestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/store/storetest"
)

// quiet is the logger of stores in tests: Pebble's lines are not wanted
// in test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens the store in dir with test options, failing t on an error.
func open(t testing.TB, dir string) *pebblestore.Store {
	t.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return st
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "db"))
	})
}

func TestStore_Durable(t *testing.T) {
	t.Parallel()
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
		return open(t, dir)
	})
}

// TestClose_NoGoroutineLeft: once Close returns, every goroutine of the
// store and of Pebble (commit pipeline, WAL flusher, compactions, disk
// health checks) is gone, after commits, reads and a flush. It must not be
// parallel: it counts the process's goroutines (the parallel tests are
// paused while it runs).
func TestClose_NoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	st := open(t, filepath.Join(t.TempDir(), "db"))
	for i := range uint64(50) {
		var b store.Batch
		b.Put(store.Task{JobID: i + 1, Queue: "q", ID: fmt.Sprint(i), State: store.Waiting, Payload: make([]byte, 100)})
		if err := st.Commit(&b); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := st.Task(1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Recover's scanning goroutine ends when fn fails or panics.
	stop := errors.New("stop")
	if err := st.Recover(func(store.Task) error { return stop }); err != stop {
		t.Fatalf("Recover = %v, want fn's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = st.Recover(func(store.Task) error { panic("fn panics") })
	}()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Goroutines that were told to stop may take a moment to be gone.
	for range 200 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf.String())
}

// TestOpen_Options: sizes given in Options are taken, and a store opened
// with small ones works.
func TestOpen_Options(t *testing.T) {
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "db"), pebblestore.Options{CacheSize: 1 << 20, MemTableSize: 1 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A batch over half the memtable goes through Pebble's large-batch path.
	var b store.Batch
	for i := range uint64(3) {
		b.Put(store.Task{JobID: i + 1, Queue: "q", ID: fmt.Sprint(i), State: store.Waiting, Payload: make([]byte, 400<<10)})
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(3) {
		if got, err := st.Task(i + 1); err != nil || len(got.Payload) != 400<<10 {
			t.Fatalf("Task(%d): %d bytes, %v", i+1, len(got.Payload), err)
		}
	}
}

// TestOpen_BlockCacheHolds: reads of tasks in tables are served from the
// block cache the second time, whatever the memtables take. Pebble counts
// its memtables against the cache; a store whose cache was only CacheSize
// cached no block once two memtables existed, and every read decompressed
// its block again.
func TestOpen_BlockCacheHolds(t *testing.T) {
	// The defaults' ratio: a cache of two memtables.
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "db"), pebblestore.Options{CacheSize: 512 << 10, MemTableSize: 256 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 10_000 // about 3 MiB: memtables filled and flushed
	for base := uint64(0); base < n; base += 500 {
		var b store.Batch
		for j := base + 1; j <= base+500; j++ {
			b.Put(benchTask(j))
		}
		if err := st.Commit(&b); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	read := func() {
		for j := uint64(1); j <= 100; j++ {
			if got, err := st.Task(j); err != nil || got.JobID != j {
				t.Fatalf("Task(%d) = %d, %v", j, got.JobID, err)
			}
		}
	}
	read()
	hits, _ := st.BlockCache()
	read()
	after, size := st.BlockCache()
	if size == 0 || after-hits < 100 {
		t.Fatalf("the second read of 100 tasks hit the block cache %d times (%d bytes cached); want at least once a task", after-hits, size)
	}
}

// TestCollector: the store's Prometheus collector reports Pebble's
// compactions, flushes and block cache, and nothing once the store is
// closed.
func TestCollector(t *testing.T) {
	st := open(t, filepath.Join(t.TempDir(), "db"))
	var b store.Batch
	for j := uint64(1); j <= 100; j++ {
		b.Put(benchTask(j))
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := st.Task(7); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(st.Collector())
	got := gather(t, reg)
	for _, name := range []string{"hourglass_store_compactions_running", "hourglass_store_compaction_debt_bytes",
		"hourglass_store_block_cache_bytes", "hourglass_store_block_cache_misses_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s in %v", name, got)
		}
	}
	if got["hourglass_store_block_cache_hits_total"] < 1 || got["hourglass_store_block_cache_bytes"] <= 0 {
		t.Errorf("a task read twice from a table: cache %v", got)
	}
	if got["hourglass_store_flushed_bytes_total"] <= 0 {
		t.Errorf("a flush wrote no bytes: %v", got)
	}
	if _, ok := got["hourglass_store_compacted_bytes_total"]; !ok {
		t.Errorf("no hourglass_store_compacted_bytes_total in %v", got)
	}
	st.Close()
	if got := gather(t, reg); len(got) != 0 {
		t.Errorf("after Close: %v", got)
	}
}

// gather returns the value of every metric reg gathers, by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				out[mf.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[mf.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestCompactions_Yield: compactions run under the store's scheduler
// (writes go on past many memtables, which they would not if no
// compaction were granted: Pebble stops writes at 12 files in L0) and
// step aside for other goroutines as they go, at each of Pebble's
// progress reports.
func TestCompactions_Yield(t *testing.T) {
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "db"), pebblestore.Options{CacheSize: 1 << 20, MemTableSize: 256 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Closed at the end, not deferred: a store whose writes stalled would
	// not close.
	// About 40 MiB through 256 KiB memtables: 160 flushes into L0.
	wrote := make(chan error, 1)
	go func() {
		for base := uint64(0); base < 40_000; base += 500 {
			var b store.Batch
			for j := base + 1; j <= base+500; j++ {
				tk := benchTask(j)
				tk.Payload = bytes.Repeat([]byte{byte(j)}, 1000)
				b.Put(tk)
			}
			if err := st.Commit(&b); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Minute): // 36 s at a load average of 11; over a minute once at 16
		done, _ := st.Compactions()
		t.Fatalf("40 MiB of writes not done after 3 minutes (%d compactions): stalled behind L0", done)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, yields := st.Compactions()
		if done > 0 && yields > 0 {
			t.Logf("%d compactions, %d yields", done, yields)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d compactions and %d yields 30 s after 40 MiB of writes, want some of each", done, yields)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := st.Task(12_345); err != nil || got.JobID != 12_345 || len(got.Payload) != 1000 {
		t.Fatalf("Task(12345) = %d, %d bytes, %v", got.JobID, len(got.Payload), err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCompactions_HeldUntilRecover: compactions wait from Open until the
// first Commit, or the first Recover returns (held while it runs), or
// the longest hold has passed, and no longer.
func TestCompactions_HeldUntilRecover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	for _, c := range []struct {
		name    string
		release func(*pebblestore.Store) error
	}{
		{"Commit", func(st *pebblestore.Store) error {
			var b store.Batch
			b.Put(benchTask(7))
			return st.Commit(&b)
		}},
		{"Recover", func(st *pebblestore.Store) error {
			return st.Recover(func(store.Task) error {
				if !st.CompactionsHeld() {
					return errors.New("compactions released while Recover runs")
				}
				return nil
			})
		}},
		{"Time", func(st *pebblestore.Store) error {
			deadline := time.Now().Add(10 * time.Second)
			for st.CompactionsHeld() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			restore := pebblestore.SetCompactionHold(time.Hour)
			if c.name == "Time" {
				pebblestore.SetCompactionHold(20 * time.Millisecond)
			}
			st := open(t, dir)
			restore()
			defer st.Close()
			if !st.CompactionsHeld() {
				t.Fatal("compactions not held after Open")
			}
			if err := c.release(st); err != nil {
				t.Fatal(err)
			}
			if st.CompactionsHeld() {
				t.Fatalf("compactions still held after %s", c.name)
			}
		})
	}
}
