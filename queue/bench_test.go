package queue_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// The benchmarks keep n entries queued in a queue.Queue, the type Timer
// runs, with deadlines spread evenly over the next ten minutes:
//
//   - AddRemove_Random: each op reschedules a random entry to a random
//     deadline (Remove then Add), the work of a timeout that is cancelled
//     and made again. Time stands still.
//   - Move_Later: each op pushes a random entry's deadline a second
//     later, as a heartbeat or an idle timeout's Reset does.
//   - AddFire_Spread: each op moves time on by span/n and re-adds whatever
//     fires, a random span/2 to 3span/2 later, so about one entry fires per
//     op and n stay queued. ns/fire is the time per entry fired.
//
// Random choices are drawn before the timer starts, so the loop measures
// the queue and not the generator. Every benchmark reports 0 allocs/op.

// span is the range the deadlines of the benchmarks are spread over.
const span = uint64(10 * time.Minute)

var (
	benchSizes     = []int{1e3, 1e4, 1e5, 1e6}
	benchListSizes = []int{1e2, 1e3, 1e4} // the sorted list's Add is O(n)
)

// benchHashedSlots is the hashed wheel's size in the benchmarks: with a
// 1 ms tick one turn is 4.1 s, so a deadline ten minutes out is about 150
// rounds away and each tick's slot holds n/4096 entries to scan.
const benchHashedSlots = 4096

var (
	hierarchical = queue.HierarchicalWheel(time.Millisecond)
	hashed       = queue.HashedWheel(time.Millisecond, benchHashedSlots)
)

// randomTable is the size of the tables of random choices, a power of two:
// 2^22, more than the entries of any size measured, so that a run reaches
// entries all over the structure rather than cycling over a few that stay
// in cache.
const randomTable = 1 << 22

// filled returns a queue of s holding n entries due in (0, span], their
// ids by entry (the entries' values are their numbers).
func filled(s queue.Structure, n int, rng *rand.Rand) (*queue.Queue[int32], []int32) {
	q := queue.New[int32](s)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = q.Add(1+rng.Uint64N(span), int32(i))
	}
	return q, ids
}

func benchAddRemove(b *testing.B, s queue.Structure, sizes []int) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			q, ids := filled(s, n, rng)
			type pick struct {
				e    int32
				when uint64
			}
			picks := make([]pick, randomTable)
			for i := range picks {
				picks[i] = pick{int32(rng.IntN(n)), 1 + rng.Uint64N(span)}
			}
			runtime.GC() // so the fill's garbage is not collected in the loop
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := picks[i&(randomTable-1)]
				i++
				q.Remove(ids[p.e])
				ids[p.e] = q.Add(p.when, p.e)
			}
		})
	}
}

func benchMoveLater(b *testing.B, s queue.Structure, sizes []int) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			q, ids := filled(s, n, rng)
			picks := make([]int32, randomTable)
			for i := range picks {
				picks[i] = ids[rng.IntN(n)]
			}
			runtime.GC()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := picks[i&(randomTable-1)]
				i++
				q.Move(id, q.When(id)+uint64(time.Second))
			}
		})
	}
}

func benchAddFire(b *testing.B, s queue.Structure, sizes []int) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			q, _ := filled(s, n, rng)
			delays := make([]uint64, randomTable)
			for i := range delays {
				delays[i] = span/2 + rng.Uint64N(span)
			}
			step := span / uint64(n)
			var now uint64
			fired := 0
			fire := func(_, e int32) {
				q.Add(now+delays[fired&(randomTable-1)], e)
				fired++
			}
			runtime.GC()
			b.ReportAllocs()
			for b.Loop() {
				now += step
				q.Advance(now, fire)
			}
			if fired > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fired), "ns/fire")
			}
		})
	}
}

func BenchmarkHierarchicalWheel_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, hierarchical, benchSizes)
}

func BenchmarkHashedWheel_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, hashed, benchSizes)
}

func BenchmarkHeap_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, queue.Heap(), benchSizes)
}

func BenchmarkSortedList_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, queue.SortedList(), benchListSizes)
}

func BenchmarkHierarchicalWheel_Move_Later(b *testing.B) {
	benchMoveLater(b, hierarchical, benchSizes)
}

func BenchmarkHeap_Move_Later(b *testing.B) {
	benchMoveLater(b, queue.Heap(), benchSizes)
}

func BenchmarkHierarchicalWheel_AddFire_Spread(b *testing.B) {
	benchAddFire(b, hierarchical, benchSizes)
}

func BenchmarkHashedWheel_AddFire_Spread(b *testing.B) {
	benchAddFire(b, hashed, benchSizes)
}

func BenchmarkHeap_AddFire_Spread(b *testing.B) {
	benchAddFire(b, queue.Heap(), benchSizes)
}

func BenchmarkSortedList_AddFire_Spread(b *testing.B) {
	benchAddFire(b, queue.SortedList(), benchListSizes)
}

// processCPU returns the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchBurst measures a burst as hourglass's Timer drives one through a
// shard: n entries due within 200 ms of their adds, added 256 at a time
// (a pass's filing) while time moves on 1 ms for every n/300 of them
// (about a 300 ms scheduling loop), then time moved on a tick at a time
// until every entry has fired. Entries take ids that earlier bursts'
// firing released, in the order it released them, as a Timer's do: ids
// whose nodes lie all over the table. With alloc, ids are taken ahead
// with Alloc, 2,048 at a time, and filed with AddAt, as Timer.Arm's pool
// does. With behind above 1, time moves on behind ms at a time, as for a
// driver that many ticks behind. ns/entry is the time per entry of a
// whole burst.
func benchBurst(b *testing.B, alloc bool, sizes []int, behind int) {
	const burst = uint64(200 * time.Millisecond)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			delays := make([]uint64, n)
			for i := range delays {
				delays[i] = rng.Uint64N(burst)
			}
			q := queue.New[int32](hierarchical)
			var now uint64
			fired := 0
			fire := func(_, _ int32) { fired++ }
			pool := make([]int32, 0, 2048)
			run := func() {
				per := max(n/300, 256)
				for i := range n {
					var id int32
					if alloc {
						if len(pool) == 0 {
							for range cap(pool) {
								pool = append(pool, q.Alloc())
							}
						}
						id = pool[len(pool)-1]
						pool = pool[:len(pool)-1]
						q.AddAt(id, now+delays[i], int32(i))
					} else {
						q.Add(now+delays[i], int32(i))
					}
					if i%256 == 255 && (i+1)%per < 256 {
						now += uint64(time.Millisecond)
						if int(now/uint64(time.Millisecond))%behind == 0 {
							q.Advance(now, fire)
						}
					}
				}
				for q.Len() > len(pool) && q.Len() > 0 {
					now += uint64(behind) * uint64(time.Millisecond)
					q.Advance(now, fire)
				}
			}
			run() // the first burst's ids are new; later ones reuse them
			runtime.GC()
			b.ReportAllocs()
			fired = 0
			cpu := processCPU()
			for b.Loop() {
				run()
			}
			cpu = processCPU() - cpu
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fired), "ns/entry")
			// On a shared host the wall time counts the waits for a core.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(fired), "cpu-ns/entry")
		})
	}
}

func BenchmarkHierarchicalWheel_Burst_Add(b *testing.B) {
	benchBurst(b, false, []int{1e5, 1e6}, 1)
}

func BenchmarkHierarchicalWheel_Burst_Alloc(b *testing.B) {
	benchBurst(b, true, []int{1e5, 1e6}, 1)
}

// BenchmarkHierarchicalWheel_Burst_Behind is Burst_Alloc at 1M with
// time moved on 16 ms at a time: a driver 16 ticks behind, whose
// advances each empty 16 slots of about 5,000 entries.
func BenchmarkHierarchicalWheel_Burst_Behind(b *testing.B) {
	benchBurst(b, true, []int{1e6}, 16)
}
