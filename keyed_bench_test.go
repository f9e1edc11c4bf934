package hourglass_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

var keyedSizes = []int{10_000, 1_000_000}

// keyStream returns len picks of keys below n, drawn before timing.
func keyStream(n int) []uint64 {
	ks := make([]uint64, 1<<16)
	for i := range ks {
		ks[i] = uint64(rand.IntN(n))
	}
	return ks
}

// BenchmarkKeyed_Set_Existing moves the pending timeout of a random one of
// n keys 30 s ahead, against a map[uint64]*time.Timer and Reset.
func BenchmarkKeyed_Set_Existing(b *testing.B) {
	for _, n := range keyedSizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
			m := make(map[uint64]*time.Timer, n)
			for i := range uint64(n) {
				m[i] = time.AfterFunc(30*time.Second, noop)
			}
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m[ks[i&(len(ks)-1)]].Reset(30 * time.Second)
				i++
			}
			b.StopTimer()
			for _, t := range m {
				t.Stop()
			}
		})
		b.Run(fmt.Sprintf("keyed/n=%d", n), func(b *testing.B) {
			k := hourglass.NewKeyed(func(uint64) {})
			for i := range uint64(n) {
				k.Set(i, 30*time.Second)
			}
			ks := keyStream(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k.Set(ks[i&(len(ks)-1)], 30*time.Second)
				i++
			}
			b.StopTimer()
			k.Stop()
		})
	}
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
			k := hourglass.NewKeyed(func(uint64) {})
			for i := range uint64(n) {
				k.Set(i, time.Hour)
			}
			b.ReportMetric(float64(heap()-before)/n, "B/key")
			k.Stop()
		}
	})
}
