package queue_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// The benchmarks keep n entries queued, owned by the caller in one slice,
// with deadlines spread evenly over the next ten minutes:
//
//   - AddRemove_Random: each op reschedules a random entry to a random
//     deadline (Remove then Add), the work of a timeout that is reset, as
//     an idle-connection timeout is on every read. Time stands still.
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

func newHierarchicalWheel() queue.Queue[int] {
	return queue.NewHierarchicalWheel[int](time.Millisecond)
}
func newHashedWheel() queue.Queue[int] {
	return queue.NewHashedWheel[int](time.Millisecond, benchHashedSlots)
}
func newHeap() queue.Queue[int]       { return queue.NewHeap[int]() }
func newSortedList() queue.Queue[int] { return queue.NewSortedList[int]() }

// randomTable is the size of the tables of random choices, a power of two:
// 2^22, more than the entries of any size measured, so that a run reaches
// entries all over the structure rather than cycling over a few that stay
// in cache.
const randomTable = 1 << 22

// filled returns a queue from newQueue holding n entries due in (0, span],
// and the entries.
func filled(newQueue func() queue.Queue[int], n int, rng *rand.Rand) (queue.Queue[int], []queue.Entry[int]) {
	q := newQueue()
	es := newEntries(n)
	for i := range es {
		q.Add(&es[i], 1+rng.Uint64N(span))
	}
	return q, es
}

func benchAddRemove(b *testing.B, newQueue func() queue.Queue[int], sizes []int) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			q, es := filled(newQueue, n, rng)
			type pick struct {
				e    *queue.Entry[int]
				when uint64
			}
			picks := make([]pick, randomTable)
			for i := range picks {
				picks[i] = pick{&es[rng.IntN(n)], 1 + rng.Uint64N(span)}
			}
			runtime.GC() // so the fill's garbage is not collected in the loop
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := picks[i&(randomTable-1)]
				i++
				q.Remove(p.e)
				q.Add(p.e, p.when)
			}
		})
	}
}

func benchAddFire(b *testing.B, newQueue func() queue.Queue[int], sizes []int) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			q, _ := filled(newQueue, n, rng)
			delays := make([]uint64, randomTable)
			for i := range delays {
				delays[i] = span/2 + rng.Uint64N(span)
			}
			step := span / uint64(n)
			var now uint64
			fired := 0
			fire := func(e *queue.Entry[int]) {
				q.Add(e, now+delays[fired&(randomTable-1)])
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
	benchAddRemove(b, newHierarchicalWheel, benchSizes)
}

func BenchmarkHashedWheel_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, newHashedWheel, benchSizes)
}

func BenchmarkHeap_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, newHeap, benchSizes)
}

func BenchmarkSortedList_AddRemove_Random(b *testing.B) {
	benchAddRemove(b, newSortedList, benchListSizes)
}

func BenchmarkHierarchicalWheel_AddFire_Spread(b *testing.B) {
	benchAddFire(b, newHierarchicalWheel, benchSizes)
}

func BenchmarkHashedWheel_AddFire_Spread(b *testing.B) {
	benchAddFire(b, newHashedWheel, benchSizes)
}

func BenchmarkHeap_AddFire_Spread(b *testing.B) {
	benchAddFire(b, newHeap, benchSizes)
}

func BenchmarkSortedList_AddFire_Spread(b *testing.B) {
	benchAddFire(b, newSortedList, benchListSizes)
}
