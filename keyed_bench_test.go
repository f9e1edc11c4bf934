package hourglass_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

var keyedSizes = []int{10_000, 1_000_000}

// keyedTimeout is where the benchmarks set and move keys' timeouts: far
// enough that none fires while they run. (A run of BenchmarkKeyed_GC_Pending
// can take longer than 30 s; runtime timers firing then start a goroutine
// each, and millions of them measure something else, or run the machine
// out of memory.)
const keyedTimeout = time.Hour

// filledKeyed returns a Keyed with keys 0 to n-1 pending, each due d from
// now.
func filledKeyed(n int, d time.Duration) *hourglass.Keyed[uint64] {
	k := hourglass.NewKeyed(func(uint64) {})
	for i := range uint64(n) {
		k.Set(i, d)
	}
	return k
}

// keyPicks is how many random keys keyStream draws: 2^22, more than the
// keys of any size but the largest, so that a run moves keys spread over
// all of the storage, as traffic over n connections does. (A short stream
// read in a cycle moves the same few keys again and again, whose entries
// stay in the processor's cache.) It is a power of two.
const keyPicks = 1 << 22

// keyStream returns keyPicks picks of keys below n, drawn before timing.
func keyStream(n int) []uint64 {
	ks := make([]uint64, keyPicks)
	for i := range ks {
		ks[i] = uint64(rand.IntN(n))
	}
	return ks
}

// filledTimers returns a map of n runtime timers, keys 0 to n-1, each
// due keyedTimeout from now.
func filledTimers(n int) map[uint64]*time.Timer {
	m := make(map[uint64]*time.Timer, n)
	for i := range uint64(n) {
		m[i] = time.AfterFunc(keyedTimeout, noop)
	}
	return m
}

// stopTimers stops every timer of m.
func stopTimers(m map[uint64]*time.Timer) {
	for _, t := range m {
		t.Stop()
	}
}

// benchResets moves the timeout of a random one of n runtime timers in a
// map[uint64]*time.Timer an hour ahead with Reset, an op a move.
func benchResets(b *testing.B, n int) {
	m := filledTimers(n)
	ks := keyStream(n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m[ks[i&(len(ks)-1)]].Reset(keyedTimeout)
		i++
	}
	b.StopTimer()
	stopTimers(m)
}

// BenchmarkKeyed_Set_Existing moves the pending timeout of a random one of
// n keys an hour ahead, against a map[uint64]*time.Timer and Reset.
func BenchmarkKeyed_Set_Existing(b *testing.B) {
	for _, n := range keyedSizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) { benchResets(b, n) })
		b.Run(fmt.Sprintf("keyed/n=%d", n), func(b *testing.B) {
			k := filledKeyed(n, keyedTimeout)
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k.Set(ks[i&(len(ks)-1)], keyedTimeout)
				i++
			}
			b.StopTimer()
			k.Stop()
		})
	}
}

// BenchmarkKeyed_SetMany_Existing is Set_Existing for a caller that
// handles events in batches: it moves the timeouts of batches of random
// keys among n an hour ahead with one SetMany each, against the runtime's
// map[uint64]*time.Timer and a Reset per key, which has no batch form. An
// op is one key.
func BenchmarkKeyed_SetMany_Existing(b *testing.B) {
	for _, n := range keyedSizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) { benchResets(b, n) })
		for _, size := range []int{8, 64} {
			b.Run(fmt.Sprintf("keyed/batch=%d/n=%d", size, n), func(b *testing.B) {
				k := filledKeyed(n, keyedTimeout)
				ks := keyStream(n)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if i%size == size-1 {
						// len(ks) is a multiple of size: a batch never wraps.
						k.SetMany(ks[i&(len(ks)-1)-(size-1):i&(len(ks)-1)+1], keyedTimeout)
					}
					i++
				}
				b.StopTimer()
				k.Stop()
			})
		}
	}
}

// BenchmarkKeyed_Set_Parallel is Set_Existing from GOMAXPROCS goroutines
// at once (b.RunParallel; see -cpu), each with picks of its own: how a
// Keyed, which one lock guards, holds up when many goroutines move keys,
// against runtime timers in a map that a sync.RWMutex guards, read-locked
// for the lookup (what a program whose expiry callbacks delete keys
// needs). An op is one move; ns/op is wall time over all goroutines.
func BenchmarkKeyed_Set_Parallel(b *testing.B) {
	const n = 1_000_000
	ks := keyStream(n)
	var next atomic.Uint64 // hands each goroutine its own part of ks
	b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
		m := filledTimers(n)
		var mu sync.RWMutex
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1 << 20))
			for pb.Next() {
				mu.RLock()
				t := m[ks[i&(len(ks)-1)]]
				mu.RUnlock()
				t.Reset(keyedTimeout)
				i++
			}
		})
		b.StopTimer()
		stopTimers(m)
	})
	b.Run(fmt.Sprintf("keyed/n=%d", n), func(b *testing.B) {
		k := filledKeyed(n, keyedTimeout)
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(1 << 20))
			for pb.Next() {
				k.Set(ks[i&(len(ks)-1)], keyedTimeout)
				i++
			}
		})
		b.StopTimer()
		k.Stop()
	})
}

// BenchmarkKeyed_Memory_PerKey reports heap bytes per pending key.
func BenchmarkKeyed_Memory_PerKey(b *testing.B) {
	const n = 1_000_000
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	b.Run("runtime", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			m := make(map[uint64]*time.Timer)
			for i := range uint64(n) {
				m[i] = time.AfterFunc(time.Hour, noop)
			}
			b.ReportMetric(float64(heap()-before)/n, "B/key")
			for _, t := range m {
				t.Stop()
			}
		}
	})
	b.Run("keyed", func(b *testing.B) {
		for b.Loop() {
			before := heap()
			k := filledKeyed(n, time.Hour)
			b.ReportMetric(float64(heap()-before)/n, "B/key")
			k.Stop()
		}
	})
}

// BenchmarkKeyed_Set_New sets a key that is not pending and removes it,
// with n other keys pending: a timeout for a request that completes in
// time. The runtime's side is a map[uint64]*time.Timer: AfterFunc and a
// map write, then a lookup, Stop and delete.
func BenchmarkKeyed_Set_New(b *testing.B) {
	for _, n := range keyedSizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
			m := filledTimers(n)
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := uint64(n) + ks[i&(len(ks)-1)] // never pending
				m[key] = time.AfterFunc(keyedTimeout, noop)
				if t, ok := m[key]; ok {
					t.Stop()
					delete(m, key)
				}
				i++
			}
			b.StopTimer()
			stopTimers(m)
		})
		b.Run(fmt.Sprintf("keyed/n=%d", n), func(b *testing.B) {
			k := filledKeyed(n, keyedTimeout)
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := uint64(n) + ks[i&(len(ks)-1)]
				k.Set(key, keyedTimeout)
				k.Remove(key)
				i++
			}
			b.StopTimer()
			k.Stop()
		})
	}
}

// BenchmarkKeyed_GC_Pending measures what n pending keys cost the garbage
// collector while a program works: 10^7 keys (10^6 with -short), then a
// fixed workload of 2n Sets, each moving a random pending key an hour ahead
// (Reset, for a map[uint64]*time.Timer) and allocating 256 bytes of
// garbage, standing in for the request that came with it, so that the
// collector runs for the same reason on both sides. An op is the whole
// workload. It reports the collector's share of the CPU available to Go
// (runtime/metrics /cpu/classes/gc/total over /cpu/classes/total, framed
// by a forced GC before and after, which counts), the GC cycles and the
// longest stop-the-world pause (MemStats.PauseNs) in the workload, and the
// heap per key after filling.
//
// Each time.Timer is a heap object with pointers that every cycle marks;
// Keyed[uint64] holds its keys in pointer-free tables and map, which the
// collector does not scan.
func BenchmarkKeyed_GC_Pending(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
		before := liveHeap()
		m := filledTimers(n)
		perKey := float64(liveHeap()-before) / float64(n)
		gcWorkload(b, n, func(key uint64) { m[key].Reset(keyedTimeout) })
		b.ReportMetric(perKey, "B/key") // after the loop, which clears metrics
		stopTimers(m)
	})
	b.Run(fmt.Sprintf("keyed/n=%d", n), func(b *testing.B) {
		before := liveHeap()
		k := filledKeyed(n, keyedTimeout)
		perKey := float64(liveHeap()-before) / float64(n)
		gcWorkload(b, n, func(key uint64) { k.Set(key, keyedTimeout) })
		b.ReportMetric(perKey, "B/key")
		k.Stop()
	})
}

// garbage keeps gcWorkload's allocations from being optimized away.
var garbage []byte

// liveHeap returns the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// gcWorkload runs the workload of BenchmarkKeyed_GC_Pending once per op,
// calling set for 2n random keys below n, and reports what the collector
// cost over all of them.
func gcWorkload(b *testing.B, n int, set func(key uint64)) {
	ks := keyStream(n)
	ops := 2 * n
	names := []string{
		"/cpu/classes/gc/total:cpu-seconds",
		"/cpu/classes/total:cpu-seconds",
		"/gc/cycles/total:gc-cycles",
	}
	before := make([]metrics.Sample, len(names))
	after := make([]metrics.Sample, len(names))
	for i, name := range names {
		before[i].Name, after[i].Name = name, name
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	metrics.Read(before)
	runtime.ReadMemStats(&m0)
	for b.Loop() {
		for i := range ops {
			set(ks[i&(len(ks)-1)])
			garbage = make([]byte, 256)
		}
	}
	b.StopTimer()
	runtime.GC()
	metrics.Read(after)
	runtime.ReadMemStats(&m1)

	gcCPU := after[0].Value.Float64() - before[0].Value.Float64()
	allCPU := after[1].Value.Float64() - before[1].Value.Float64()
	cycles := after[2].Value.Uint64() - before[2].Value.Uint64()
	var longest uint64
	for c := m0.NumGC + 1; c <= m1.NumGC; c++ {
		if m1.NumGC-c < 256 {
			longest = max(longest, m1.PauseNs[(c+255)%256])
		}
	}
	b.ReportMetric(100*gcCPU/allCPU, "gc-cpu-%")
	b.ReportMetric(float64(cycles)/float64(b.N), "gc-cycles/op")
	b.ReportMetric(float64(longest)/1e3, "max-pause-µs")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ops), "ns/set")
}
