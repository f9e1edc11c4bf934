package queue_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// TestHierarchicalWheel_NearDeadlinesNeverCascade checks that entries due
// within the current block of 1,024 ticks are filed straight into the
// level-0 slot they fire from: driven by Next, every wake-up fires an
// entry, and there are as many as distinct ticks. A level 0 of 64 slots
// would send the entries due after tick 63 to level 1, and Next would
// report the start of each level-1 slot, a cascade that fires nothing.
func TestHierarchicalWheel_NearDeadlinesNeverCascade(t *testing.T) {
	q := queue.New[int](queue.HierarchicalWheel(time.Millisecond))
	rng := rand.New(rand.NewPCG(45, 1))
	var ticks []uint64
	for i := range 500 {
		tk := 1 + rng.Uint64N(1023) // ticks 1 to 1,023: the first block
		ticks = append(ticks, tk)
		q.Add(tk*ms, i)
	}
	slices.Sort(ticks)
	ticks = slices.Compact(ticks)
	wakeups := 0
	for {
		next, ok := q.Next()
		if !ok {
			break
		}
		wakeups++
		fired := 0
		q.Advance(next, func(int32, int) { fired++ })
		if fired == 0 {
			t.Fatalf("wake-up %d at %v fired nothing: a cascade", wakeups, time.Duration(next))
		}
		if want := ticks[wakeups-1] * ms; next != want {
			t.Fatalf("wake-up %d at %v, want %v", wakeups, time.Duration(next), time.Duration(want))
		}
	}
	if wakeups != len(ticks) {
		t.Errorf("%d wake-ups for %d distinct ticks", wakeups, len(ticks))
	}
}

// TestHierarchicalWheel_SlotFiresWhole checks a level-0 slot fired whole
// (while a second walk reads it from the back) against what release does
// meanwhile: entries of one tick fire in the order added; entries of the
// slot that release removes, from either end, never fire; entries
// moved later before the Advance fire at their new tick, in deadline
// order within the same Advance; an entry that release moves later is
// filed again. Nothing fires twice, early or not at all.
func TestHierarchicalWheel_SlotFiresWhole(t *testing.T) {
	q := queue.New[int](queue.HierarchicalWheel(time.Millisecond))
	const n = 40
	ids := make([]int32, n)
	for i := range n {
		ids[i] = q.Add(5*ms, i) // all in level-0 slot 5
	}
	// Entries 10 and 11 move to ticks 8 and 7: still in slot 5, due later.
	q.Move(ids[10], 8*ms)
	q.Move(ids[11], 7*ms)
	removed := map[int]bool{}
	var fired []int
	var ticks []uint64
	q.Advance(9*ms, func(id int32, v int) {
		fired = append(fired, v)
		ticks = append(ticks, q.When(id))
		switch v {
		case 0: // the first to fire: remove the slot's last and the one before it
			for _, k := range []int{n - 1, n - 2} {
				if q.Remove(ids[k]) {
					removed[k] = true
				}
			}
		case 1:
			q.Move(ids[2], 20*ms) // still in the slot: fires later, not now
			if q.Remove(ids[3]) {
				removed[3] = true
			}
		}
	})
	seen := map[int]bool{}
	for k, v := range fired {
		if seen[v] {
			t.Fatalf("entry %d fired twice", v)
		}
		seen[v] = true
		if removed[v] {
			t.Fatalf("entry %d fired after release removed it", v)
		}
		if k > 0 && (ticks[k] < ticks[k-1] || ticks[k] == ticks[k-1] && v < fired[k-1]) {
			t.Fatalf("fired out of order: %v at %v", fired, ticks)
		}
	}
	if !removed[n-1] && !removed[n-2] || !removed[3] {
		t.Fatalf("release's Removes found nothing: %v", removed)
	}
	want := n - len(removed) - 1 // all but the removed and entry 2
	if len(fired) != want {
		t.Fatalf("fired %d entries, want %d: %v", len(fired), want, fired)
	}
	if got := ticks[len(ticks)-2:]; got[0] != 7*ms || got[1] != 8*ms {
		t.Fatalf("the moved entries fired at %v, want 7ms then 8ms last", got)
	}
	if q.Len() != 1 || q.When(ids[2]) != 20*ms {
		t.Fatalf("Len %d, want entry 2 pending at 20ms", q.Len())
	}
	var last []int
	q.Advance(20*ms, func(_ int32, v int) { last = append(last, v) })
	if len(last) != 1 || last[0] != 2 {
		t.Fatalf("at 20ms fired %v, want [2]", last)
	}
}

// TestHierarchicalWheel_FiringLevel0AllocatesNothing checks that a
// wheel whose entries fire from level 0 allocates nothing to fire them,
// its first Advance included: a level-0 slot fires whole, and only a
// cascade needs the marks that keep a spread slot's order.
func TestHierarchicalWheel_FiringLevel0AllocatesNothing(t *testing.T) {
	q := queue.New[int](queue.HierarchicalWheel(time.Millisecond))
	// The ids the Adds take are taken and given back first, so that the
	// stack of free ids that firing fills is grown already.
	for range 2048 {
		q.Alloc()
	}
	for id := range int32(2048) {
		q.Free(id)
	}
	for i := range 2048 {
		q.Add(uint64(1+i%500)*ms, i)
	}
	fired := 0
	fire := func(int32, int) { fired++ }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	q.Advance(600*ms, fire)
	runtime.ReadMemStats(&after)
	if a := after.Mallocs - before.Mallocs; a != 0 {
		t.Fatalf("the first Advance allocated %d times", a)
	}
	if fired != 2048 {
		t.Fatalf("fired %d, want 2048", fired)
	}
}
