package broker

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/hourglass-go/hourglass/service"
)

func cursorOf(due int64, job uint64) service.Cursor { return service.Cursor{Due: due, Job: job} }

// BenchmarkDueOrder_Add_Random measures dueOrder.add of n tasks due at
// random in one queue, the cost a put pays for its task's place in the
// due order, and the memory that place takes: B/task is the heap the
// order holds per task, after a GC.
func BenchmarkDueOrder_Add_Random(b *testing.B) {
	for _, n := range []int{1_000_000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			dues := make([]int64, n)
			for i := range dues {
				dues[i] = r.Int64N(int64(n) * 1000)
			}
			var perTask float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var o dueOrder
				for i, d := range dues {
					o.add(0, d, uint64(i+1))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perTask = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(&o)
			}
			b.ReportMetric(perTask, "B/task")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/add")
		})
	}
}

// TestDueOrder: after walks a queue's tasks in (due, job id) order from
// a cursor, stops before a due bound, and remove takes out exactly one
// task; an emptied queue drops its tree.
func TestDueOrder(t *testing.T) {
	var o dueOrder
	for _, k := range []dueKey{{30, 1}, {10, 2}, {20, 3}, {10, 4}, {20, 5}} {
		o.add(7, k.due, k.job)
	}
	o.add(8, 5, 6)
	walk := func(due int64, job uint64, before int64) string {
		var s string
		o.after(7, cursorOf(due, job), before, func(d int64, j uint64) bool {
			s += fmt.Sprintf("%d:%d ", d, j)
			return true
		})
		return s
	}
	if got := walk(0, 0, 0); got != "10:2 10:4 20:3 20:5 30:1 " {
		t.Fatalf("from the start: %q", got)
	}
	if got := walk(10, 4, 0); got != "20:3 20:5 30:1 " {
		t.Fatalf("after (10, 4): %q", got)
	}
	if got := walk(10, 2, 30); got != "10:4 20:3 20:5 " {
		t.Fatalf("after (10, 2) before 30: %q", got)
	}
	o.remove(7, 20, 3)
	o.remove(7, 20, 99) // not there
	if got := walk(0, 0, 0); got != "10:2 10:4 20:5 30:1 " || o.len(7) != 4 {
		t.Fatalf("after a remove: %q, %d", got, o.len(7))
	}
	o.remove(8, 5, 6)
	if _, ok := o.queues[8]; ok {
		t.Fatal("an emptied queue keeps its tree")
	}
}
