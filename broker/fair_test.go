package broker

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/hourglass-go/hourglass/service"
)

// TestLanes_Model checks lanes against a model over random pushes and
// takes: each take is the first task of the lane, among those whose
// first task has the lowest priority, whose key comes first after the
// last key served in the order of service.KeyCompare (names, "" last),
// wrapping round; within a lane, delivery order. Every lane's position
// is its index in order, and a lane without items is gone. Every other
// round's keys are alike in their first 20 bytes.
func TestLanes_Model(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var ls lanes
		model := map[string][]readyItem{}
		cursor := ""
		job := uint64(0)
		keys := 1 + r.IntN(8)
		for step := range 400 {
			if r.IntN(3) > 0 {
				job++
				k := ""
				if i := r.IntN(keys); i > 0 {
					k = fmt.Sprint("k", i)
					if round%2 == 1 {
						// Alike in their first 20 bytes.
						k = fmt.Sprint("tenant-of-the-queue-", 9-i)
					}
				}
				it := readyItem{prio: uint32(r.IntN(3)), due: int64(r.IntN(5)), job: job}
				ls.push(k, it)
				model[k] = append(model[k], it)
				continue
			}
			var want string
			var best []readyItem
			for k, items := range model {
				slices.SortFunc(items, func(a, b readyItem) int {
					if a.less(b) {
						return -1
					}
					return 1
				})
				switch {
				case best == nil || items[0].prio < best[0].prio:
				case items[0].prio > best[0].prio:
					continue
				case service.KeyAfter(k, cursor) != service.KeyAfter(want, cursor):
					if !service.KeyAfter(k, cursor) {
						continue
					}
				case service.KeyCompare(k, want) > 0:
					continue
				}
				want, best = k, items
			}
			l := ls.first()
			if best == nil {
				if l != nil {
					t.Fatalf("round %d step %d: lane %q first with no tasks", round, step, l.key)
				}
				continue
			}
			if l == nil || l.key != want || l.heap[0] != best[0] {
				t.Fatalf("round %d step %d: first lane %+v, want key %q item %+v", round, step, l, want, best[0])
			}
			l.heap.pop()
			ls.served(l)
			cursor = want
			if len(best) == 1 {
				delete(model, want)
			} else {
				model[want] = best[1:]
			}
			for i, o := range ls.order {
				if o.l.pos != i || len(o.l.heap) == 0 {
					t.Fatalf("round %d step %d: lane %q at %d says %d, %d items", round, step, o.l.key, i, o.l.pos, len(o.l.heap))
				}
				if o != o.l.ref() {
					t.Fatalf("round %d step %d: lane %q placed as %+v, is %+v", round, step, o.l.key, o, o.l.ref())
				}
			}
			if len(ls.byKey) != len(model)-btoi(model[""] != nil) {
				t.Fatalf("round %d step %d: %d lanes kept, want %d", round, step, len(ls.byKey), len(model))
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLanes_Memory measures what a key with ready tasks costs in a
// queue's lanes (its key's bytes are the task's, not counted), and that
// a key whose tasks were taken costs nothing: the target of issue 42 is
// 200 bytes a key.
func TestLanes_Memory(t *testing.T) {
	const n = 200_000
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
	var ls lanes
	before := heap()
	for i, k := range keys {
		ls.push(k, readyItem{job: uint64(i + 1)})
	}
	after := heap()
	per := float64(after-before) / n
	t.Logf("%d keys with one ready task each: %.0f bytes a key in lanes", n, per)
	if per > 200 {
		t.Errorf("%.0f bytes a key, over 200", per)
	}
	// One key keeps a backlog while the others' tasks are taken.
	for range 1000 {
		ls.push(keys[0], readyItem{job: 1})
	}
	for l := ls.first(); len(ls.order) > 1; l = ls.first() {
		if l.key != keys[0] {
			l.heap.pop()
			ls.served(l)
		} else {
			ls.served(l) // keeps it, behind the others
		}
	}
	if left := int64(heap()) - int64(before); left > 256<<10 {
		t.Errorf("%d bytes left with one key of 1,001 ready tasks", left)
	}
	for l := ls.first(); l != nil; l = ls.first() {
		l.heap.pop()
		ls.served(l)
	}
	if len(ls.byKey) != 0 || len(ls.order) != 0 {
		t.Fatalf("after every task was taken: %d lanes, %d in order", len(ls.byKey), len(ls.order))
	}
	if left := int64(heap()) - int64(before); left > 64<<10 {
		t.Errorf("%d bytes left after every task was taken", left)
	}
	runtime.KeepAlive(keys)
}

// BenchmarkReady_PushPop measures the ready structure alone for tasks of
// one key (the common case): a push and a pop of the first task from a
// queue of 100,000 ready tasks, through the lanes of fair.go and through
// the one heap a queue held before keys.
func BenchmarkReady_PushPop(b *testing.B) {
	const n = 100_000
	r := rand.New(rand.NewPCG(3, 4))
	items := make([]readyItem, n)
	for i := range items {
		items[i] = readyItem{prio: uint32(r.IntN(3)), due: int64(r.IntN(1e6)), job: uint64(i + 1)}
	}
	b.Run("Heap", func(b *testing.B) {
		var h readyHeap
		for _, it := range items {
			h.push(it)
		}
		i := 0
		for b.Loop() {
			it, _ := h.pop()
			it.job += n
			h.push(it)
			i++
		}
	})
	b.Run("Lanes", func(b *testing.B) {
		var ls lanes
		for _, it := range items {
			ls.push("", it)
		}
		for b.Loop() {
			l := ls.first()
			it, _ := l.heap.pop()
			ls.served(l)
			it.job += n
			ls.push("", it)
		}
	})
}

// BenchmarkLanes_Serve measures a reserve's work in the lanes alone:
// take the first task of the first lane, give that lane the next turn,
// and put a task back into it (so the sizes stay), with 10,000 keys of
// 50 ready tasks each, all of one priority (the keys scenario's shape:
// every serve moves a lane to the back of the turns), and with one key
// of 500,000 for comparison.
func BenchmarkLanes_Serve(b *testing.B) {
	for _, c := range []struct {
		name string
		keys int
	}{{"keys=1", 1}, {"keys=10000", 10_000}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 500_000
			var ls lanes
			names := make([]string, c.keys)
			for i := range names {
				names[i] = fmt.Sprintf("tenant-%05d", i)
			}
			job := uint64(0)
			for i := range n {
				job++
				ls.push(names[i%c.keys], readyItem{due: int64(job), job: job})
			}
			for b.Loop() {
				l := ls.first()
				l.heap.pop()
				ls.served(l)
				job++
				ls.push(l.key, readyItem{due: int64(job), job: job})
			}
		})
	}
}

// TestKeptCursors checks the bounds of the cursors kept for dropped
// queues: a cursor is taken once, goes after keptCursorAge, the oldest
// go past maxKeptCursors, and a cursor at "" is not kept.
func TestKeptCursors(t *testing.T) {
	var k keptCursors
	k.keep("q", "b", 1)
	if got := k.take("q", 2); got != "b" {
		t.Fatalf("take = %q, want b", got)
	}
	if got := k.take("q", 3); got != "" {
		t.Fatalf("taken twice: %q", got)
	}
	k.keep("q", "b", 10)
	k.keep("q", "", 11)
	if got := k.take("q", 12); got != "" {
		t.Fatalf("a cursor at \"\" kept: %q", got)
	}
	k.keep("old", "x", 100)
	k.keep("new", "y", 100+int64(keptCursorAge)/2)
	now := 101 + int64(keptCursorAge)
	if got := k.take("old", now); got != "" {
		t.Fatalf("a cursor older than %s kept: %q", keptCursorAge, got)
	}
	if got := k.take("new", now); got != "y" {
		t.Fatalf("a cursor younger than %s gone: %q", keptCursorAge, got)
	}
	for i := range maxKeptCursors + 10 {
		k.keep(fmt.Sprint("q", i), "k", now)
	}
	if len(k.m) != maxKeptCursors || len(k.fifo) != maxKeptCursors {
		t.Fatalf("%d cursors kept, %d in fifo; want %d", len(k.m), len(k.fifo), maxKeptCursors)
	}
	if k.take("q0", now) != "" || k.take(fmt.Sprint("q", maxKeptCursors+9), now) != "k" {
		t.Fatal("not the oldest dropped first")
	}
	k.expire(now + int64(keptCursorAge) + 1)
	if k.m != nil || k.fifo != nil {
		t.Fatalf("after expiry: %d kept, %d in fifo", len(k.m), len(k.fifo))
	}
}
