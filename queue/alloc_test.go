package queue_test

import (
	"math"
	"testing"

	"github.com/hourglass-go/hourglass/queue"
)

// TestAlloc checks Alloc, AddAt and Free on every structure: an id from
// Alloc names no entry until AddAt files one under it, which then fires
// like one from Add; an id freed unfiled is handed out again; ids from
// Alloc and Add never collide.
func TestAlloc(t *testing.T) {
	forEach(t, func(t *testing.T, s structure) {
		q := s.new().q
		var e1, e2, e3 Entry
		a := q.Alloc()
		b := q.Add(5*ms, &e1)
		if a == b {
			t.Fatalf("Add handed out id %d, which Alloc had", a)
		}
		if q.Queued(a) || q.RemoveIf(a, nil) || q.Len() != 1 {
			t.Fatalf("an id from Alloc names an entry: Queued %v, Len %d", q.Queued(a), q.Len())
		}
		q.AddAt(a, 3*ms, &e2)
		if !q.Queued(a) || q.When(a) != 3*ms || q.Value(a) != &e2 || q.Len() != 2 {
			t.Fatalf("after AddAt: Queued %v, When %d, Len %d", q.Queued(a), q.When(a), q.Len())
		}
		if err := queue.Verify(q); err != nil {
			t.Fatal(err)
		}
		c := q.Alloc()
		q.Free(c)
		if d := q.Alloc(); d != c {
			t.Errorf("Alloc after Free(%d) = %d; want the id freed", c, d)
		} else {
			q.AddAt(d, 4*ms, &e3)
		}
		var fired []*Entry
		q.Advance(math.MaxUint64, func(_ int32, v *Entry) { fired = append(fired, v) })
		if len(fired) != 3 || fired[0] != &e2 || fired[1] != &e3 || fired[2] != &e1 {
			t.Errorf("fired %v; want e2, e3, e1 in deadline order", fired)
		}
		if q.Len() != 0 {
			t.Errorf("Len = %d after all fired", q.Len())
		}
	})
}
