package hourglass_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

var benchSizes = []int{10_000, 1_000_000}

func noop() {}

// resetAfterGC collects the garbage of a benchmark's set-up and resets
// its timer: a collection still marking a million timeouts just filed
// would run beside the timed loop, with write barriers on, for part of
// it (testing.B collects before a benchmark function, not after its
// set-up).
func resetAfterGC(b *testing.B) {
	runtime.GC()
	b.ResetTimer()
}

// benchStructures are the structures the Timer benchmarks run, the
// sorted list left out (its O(n) insert makes 1M pending take minutes).
var benchStructures = []struct {
	name string
	opt  hourglass.Option
}{
	{"hierarchical", hourglass.WithHierarchicalWheel(time.Millisecond)},
	{"hashed", hourglass.WithHashedWheel(time.Millisecond, 1<<16)},
	{"heap", hourglass.WithHeap()},
}

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
			resetAfterGC(b)
			for b.Loop() {
				t := time.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
				t.Stop()
			}
			b.StopTimer()
			for _, t := range ts {
				t.Stop()
			}
		})
		for _, s := range benchStructures {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				tm := hourglass.New(s.opt)
				for range n {
					tm.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
				}
				b.ReportAllocs()
				resetAfterGC(b)
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

// BenchmarkTimer_ArmCancel_Pending is BenchmarkTimer_AfterFuncCancel_Pending
// through Timer.Arm and Timer.Cancel: the same pair with a Handle value
// instead of a *Timeout.
func BenchmarkTimer_ArmCancel_Pending(b *testing.B) {
	for _, n := range benchSizes {
		for _, s := range benchStructures {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				tm := hourglass.New(s.opt)
				for range n {
					tm.Arm(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
				}
				b.ReportAllocs()
				resetAfterGC(b)
				for b.Loop() {
					h, _ := tm.Arm(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
					tm.Cancel(h)
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
		resetAfterGC(b)
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
		resetAfterGC(b)
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

// batchSizes are the timeouts a batch schedules, and cancels, in
// BenchmarkBatch_AfterFuncCancel_Pending.
var batchSizes = []int{64, 1024}

// BenchmarkBatch_AfterFuncCancel_Pending schedules and cancels timeouts k
// at a time while n others are pending: each batch cancels the k the
// previous one scheduled and schedules k new ones, so every timeout is
// filed into the structure and taken out again. ns/op is per
// schedule+cancel pair. The runtime, which has no batch, makes the same
// calls one at a time: time.AfterFunc k times, then Stop of the previous
// k. The pending timeouts are scheduled through batches too, so that the
// structure the batch works on holds them. The delays, 1-2 h, are drawn
// before the timer starts, for both sides, so that the loop measures the
// timers and not the generator (a draw is a sizeable part of a pair).
func BenchmarkBatch_AfterFuncCancel_Pending(b *testing.B) {
	delays := make([]time.Duration, 1<<16)
	for i := range delays {
		delays[i] = time.Hour + time.Duration(rand.Int64N(int64(time.Hour)))
	}
	next := 0
	delay := func() time.Duration {
		next++
		return delays[next&(len(delays)-1)]
	}
	for _, n := range benchSizes {
		for _, k := range batchSizes {
			b.Run(fmt.Sprintf("runtime/k=%d/n=%d", k, n), func(b *testing.B) {
				ts := make([]*time.Timer, n)
				for i := range ts {
					ts[i] = time.AfterFunc(delay(), noop)
				}
				last := make([]*time.Timer, k)
				for i := range last {
					last[i] = time.AfterFunc(delay(), noop)
				}
				b.ReportAllocs()
				resetAfterGC(b)
				for i := 0; i < b.N; i += k {
					for j := range last {
						last[j].Stop()
						last[j] = time.AfterFunc(delay(), noop)
					}
				}
				b.StopTimer()
				for _, t := range append(ts, last...) {
					t.Stop()
				}
			})
			for _, s := range benchStructures {
				b.Run(fmt.Sprintf("%s/k=%d/n=%d", s.name, k, n), func(b *testing.B) {
					tm := hourglass.New(s.opt)
					for i := 0; i < n; i += 1024 {
						tm.Batch(func(bt *hourglass.Batch) {
							for range min(1024, n-i) {
								bt.AfterFunc(delay(), noop)
							}
						})
					}
					last := make([]hourglass.Handle, k)
					tm.Batch(func(bt *hourglass.Batch) {
						for j := range last {
							last[j], _ = bt.AfterFunc(delay(), noop)
						}
					})
					b.ReportAllocs()
					resetAfterGC(b)
					for i := 0; i < b.N; i += k {
						tm.Batch(func(bt *hourglass.Batch) {
							for j, h := range last {
								bt.Cancel(h)
								last[j], _ = bt.AfterFunc(delay(), noop)
							}
						})
					}
					b.StopTimer()
					tm.Stop()
				})
			}
		}
	}
}

// BenchmarkBatch_AfterFuncCancel_SameBatch schedules k timeouts through a
// Batch and cancels the same k in it, with n others pending: delays over
// 0-10 minutes, a timeout per request of a poll, every request answered.
// ns/op is per schedule+cancel pair. The runtime makes the same calls
// one at a time: time.AfterFunc k times, then Stop of the k. Delays are
// drawn before the timer starts, for both sides; the pending timeouts
// fire while the loop runs, as they come due.
func BenchmarkBatch_AfterFuncCancel_SameBatch(b *testing.B) {
	const k = 64
	delays := make([]time.Duration, 1<<16)
	for i := range delays {
		delays[i] = time.Duration(rand.Int64N(int64(10 * time.Minute)))
	}
	next := 0
	delay := func() time.Duration {
		next++
		return delays[next&(len(delays)-1)]
	}
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("runtime/n=%d", n), func(b *testing.B) {
			ts := make([]*time.Timer, n)
			for i := range ts {
				ts[i] = time.AfterFunc(delay(), noop)
			}
			last := make([]*time.Timer, k)
			b.ReportAllocs()
			resetAfterGC(b)
			for i := 0; i < b.N; i += k {
				for j := range last {
					last[j] = time.AfterFunc(delay(), noop)
				}
				for _, t := range last {
					t.Stop()
				}
			}
			b.StopTimer()
			for _, t := range ts {
				t.Stop()
			}
		})
		b.Run(fmt.Sprintf("hierarchical/n=%d", n), func(b *testing.B) {
			tm := hourglass.New(hourglass.WithExecutor(hourglass.Inline))
			for i := 0; i < n; i += 1024 {
				tm.Batch(func(bt *hourglass.Batch) {
					for range min(1024, n-i) {
						bt.AfterFunc(delay(), noop)
					}
				})
			}
			last := make([]hourglass.Handle, k)
			b.ReportAllocs()
			resetAfterGC(b)
			for i := 0; i < b.N; i += k {
				tm.Batch(func(bt *hourglass.Batch) {
					for j := range last {
						last[j], _ = bt.AfterFunc(delay(), noop)
					}
					for _, h := range last {
						bt.Cancel(h)
					}
				})
			}
			b.StopTimer()
			tm.Stop()
		})
	}
}

// BenchmarkTimer_Burst_Inline is a burst in miniature, per timeout: one
// goroutine schedules timeouts due within 2 ms of their calls, 1,024 at
// a time, on an Inline Timer, and waits for them to fire before the
// next 1,024. It times scheduling and firing together, the work of the
// burst rows of benchmarks/netty, with n others pending far away.
func BenchmarkTimer_Burst_Inline(b *testing.B) {
	for _, api := range []string{"AfterFunc", "Arm"} {
		b.Run(fmt.Sprintf("%s/n=%d", api, 10_000), func(b *testing.B) {
			tm := hourglass.New(hourglass.WithExecutor(hourglass.Inline))
			defer tm.Stop()
			for range 10_000 {
				tm.AfterFunc(time.Hour+time.Duration(rand.Int64N(int64(time.Hour))), noop)
			}
			var fired atomic.Int64
			f := func() { fired.Add(1) }
			b.ReportAllocs()
			resetAfterGC(b)
			var want int64
			for i := 0; i < b.N; {
				k := min(1024, b.N-i)
				for j := range k {
					d := time.Duration(j%2000) * time.Microsecond
					if api == "Arm" {
						tm.Arm(d, f)
					} else {
						tm.AfterFunc(d, f)
					}
				}
				i += k
				want += int64(k)
				for fired.Load() < want {
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
	}
}

// BenchmarkPair_Netty is the schedule+cancel pair of benchmarks/netty's
// pair rows in go test: the default Timer (New()) with 1M timeouts
// pending at 0-10 min, their handles kept, then one timeout at 0-10 min
// scheduled and cancelled at a time. Unlike the _Pending benchmarks
// above, whose pending timeouts are an hour or more away, deadlines come
// due throughout, so the drivers wake about once a tick as they do in
// the Netty comparison. The delays are drawn beforehand. Beside the
// wall time a pair it reports caller-cpu-ns/op, the CPU of the
// benchmark's own thread (locked to it) a pair, which a loaded machine
// moves far less than the wall time.
func BenchmarkPair_Netty(b *testing.B) {
	const n = 1_000_000
	const tenMinutes = int64(10 * time.Minute)
	delays := make([]time.Duration, 1<<16)
	r := rand.New(rand.NewPCG(2, 45))
	for i := range delays {
		delays[i] = time.Duration(r.Int64N(tenMinutes))
	}
	b.Run("Arm", func(b *testing.B) {
		tm := hourglass.New()
		kept := make([]hourglass.Handle, n)
		for i := range kept {
			kept[i], _ = tm.Arm(time.Duration(r.Int64N(tenMinutes)), noop)
		}
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		resetAfterGC(b)
		c0, i := threadCPU(), 0
		for b.Loop() {
			h, _ := tm.Arm(delays[i&(len(delays)-1)], noop)
			tm.Cancel(h)
			i++
		}
		b.StopTimer()
		b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "caller-cpu-ns/op")
		tm.Stop()
		runtime.KeepAlive(kept)
	})
	b.Run("AfterFunc", func(b *testing.B) {
		tm := hourglass.New()
		kept := make([]*hourglass.Timeout, n)
		for i := range kept {
			kept[i], _ = tm.AfterFunc(time.Duration(r.Int64N(tenMinutes)), noop)
		}
		b.ReportAllocs()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		resetAfterGC(b)
		c0, i := threadCPU(), 0
		for b.Loop() {
			to, _ := tm.AfterFunc(delays[i&(len(delays)-1)], noop)
			to.Cancel()
			i++
		}
		b.StopTimer()
		b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "caller-cpu-ns/op")
		tm.Stop()
	})
}

// threadCPU returns the CPU time, user and system, that the calling
// thread has used (Linux's RUSAGE_THREAD); lock the goroutine to its
// thread around what it measures.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
