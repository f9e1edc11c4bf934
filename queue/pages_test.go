package queue_test

import (
	"math"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// TestQueue_PagesGrow fills a Queue past a hundred of its 1,024-entry
// pages, some of them added from inside fire, while nodes are linked in
// the structure and in the firing list: every entry must keep its value
// and deadline, and fire once.
func TestQueue_PagesGrow(t *testing.T) {
	const n = 2<<16 + 5_000
	for _, s := range []struct {
		name string
		s    queue.Structure
	}{
		{"hierarchical", queue.HierarchicalWheel(time.Millisecond)},
		{"hashed", queue.HashedWheel(time.Millisecond, 256)},
		{"heap", queue.Heap()},
	} {
		t.Run(s.name, func(t *testing.T) {
			q := queue.New[int](s.s)
			ids := make(map[int]int32)
			// The first half now, so that fire's adds below grow pages.
			for v := range n / 2 {
				ids[v] = q.Add(uint64(v%977+1)*uint64(time.Millisecond), v)
			}
			for v := 0; v < n/2; v += 3 {
				if !q.Remove(ids[v]) {
					t.Fatalf("Remove(%d) = false", v)
				}
				delete(ids, v)
			}
			for v, id := range ids {
				if got, ok := q.Lookup(id); !ok || got != v {
					t.Fatalf("Lookup(%d) = %d, %v, want %d", id, got, ok, v)
				}
			}
			next, top := n/2, int32(0)
			fired := make(map[int]bool)
			q.Advance(math.MaxUint64, func(id int32, v int) {
				if fired[v] {
					t.Fatalf("%d fired twice", v)
				}
				if ids[v] != id {
					t.Fatalf("%d fired as id %d, was added as %d", v, id, ids[v])
				}
				fired[v] = true
				delete(ids, v)
				// Two adds from fire, due at once (the next Advance's), so that
				// fire uses up the free ids and grows the last page.
				for range 2 {
					if next < n {
						ids[next] = q.Add(0, next)
						next++
					}
				}
			})
			for _, id := range ids {
				top = max(top, id)
			}
			if top < 1<<16+4096 {
				t.Fatalf("highest id %d: fire grew no page", top)
			}
			for next < n {
				ids[next] = q.Add(uint64(next), next)
				next++
			}
			q.Advance(math.MaxUint64, func(id int32, v int) {
				if fired[v] || ids[v] != id {
					t.Fatalf("%d fired twice, or as id %d, added as %d", v, id, ids[v])
				}
				fired[v] = true
				delete(ids, v)
			})
			if len(ids) != 0 || q.Len() != 0 {
				t.Fatalf("%d entries never fired, Len %d", len(ids), q.Len())
			}
			if want := n - (n/2+2)/3; len(fired) != want {
				t.Fatalf("%d fired, want %d", len(fired), want)
			}
		})
	}
}
