package hourglass_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

var benchSizes = []int{10_000, 1_000_000}

func noop() {}

// BenchmarkTimer_AfterFuncCancel_Pending schedules and cancels one timeout
// while n others are pending, against time.AfterFunc and Stop.
func BenchmarkTimer_AfterFuncCancel_Pending(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
			ts := make([]*time.Timer, n)
			for i := range ts {
				ts[i] = time.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				t := time.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
				t.Stop()
			}
			b.StopTimer()
			for _, t := range ts {
				t.Stop()
			}
		})
		for _, s := range []struct {
			name string
			opt  hourglass.Option
		}{
			{"hierarchical", hourglass.WithHierarchicalWheel(time.Millisecond)},
			{"hashed", hourglass.WithHashedWheel(time.Millisecond, 1<<16)},
			{"heap", hourglass.WithHeap()},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				tm := hourglass.New(s.opt)
				for range n {
					tm.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					to, _ := tm.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
					to.Cancel()
				}
				b.StopTimer()
				tm.Stop()
			})
		}
	}
}

// BenchmarkTimer_AfterFuncCancel_Parallel is the same operation from
// GOMAXPROCS goroutines at once, with 1M timeouts pending.
func BenchmarkTimer_AfterFuncCancel_Parallel(b *testing.B) {
	const n = 1_000_000
	b.Run("runtime", func(b *testing.B) {
		ts := make([]*time.Timer, n)
		for i := range ts {
			ts[i] = time.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				time.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop).Stop()
			}
		})
		b.StopTimer()
		for _, t := range ts {
			t.Stop()
		}
	})
	b.Run("hierarchical", func(b *testing.B) {
		tm := hourglass.New()
		for range n {
			tm.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				to, _ := tm.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
				to.Cancel()
			}
		})
		b.StopTimer()
		tm.Stop()
	})
}
