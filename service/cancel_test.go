package service_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
)

// TestCancels_Bounded: the leases ended are remembered for
// service.CancelMemory, then forgotten, and never more than
// service.MaxCancelled at once, the oldest forgotten first; a watcher
// hears of each until it stops watching.
func TestCancels_Bounded(t *testing.T) {
	c := service.NewCancelsForTest()
	var heard []string
	stop := c.Watch(func(l string) { heard = append(heard, l) })
	t0 := time.Unix(1000, 0)
	c.LeaseEnded("a", t0)
	c.LeaseEnded("b", t0.Add(time.Second))
	if got := c.Ended([]string{"a", "b", "c"}, t0.Add(service.CancelMemory)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Ended within the memory = %q; want [a b]", got)
	}
	if got := c.Ended([]string{"a", "b"}, t0.Add(service.CancelMemory+time.Second/2)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Ended once a's memory is over = %q; want [b]", got)
	}
	if n, k := c.Remembered(); n != 1 || k != 1 {
		t.Fatalf("remembered %d leases, order %d; want 1, 1", n, k)
	}
	stop()
	c.LeaseEnded("c", t0.Add(2*time.Second))
	if !slices.Equal(heard, []string{"a", "b"}) {
		t.Fatalf("the watcher heard %q; want [a b], nothing after it stopped", heard)
	}

	// A flood within the memory: at most MaxCancelled, the newest.
	now := t0.Add(3 * time.Second)
	for i := range service.MaxCancelled + 500 {
		c.LeaseEnded(fmt.Sprint("f", i), now)
	}
	if n, k := c.Remembered(); n != service.MaxCancelled || k != service.MaxCancelled {
		t.Fatalf("after a flood: %d leases, order %d; want %d", n, k, service.MaxCancelled)
	}
	last := fmt.Sprint("f", service.MaxCancelled+499)
	if got := c.Ended([]string{"f0", "f499", "f500", last}, now); !slices.Equal(got, []string{"f500", last}) {
		t.Fatalf("after a flood, Ended = %q; want the newest [f500 %s]", got, last)
	}
	// All forgotten once their memory is over.
	c.Ended([]string{"x"}, now.Add(service.CancelMemory+time.Second))
	if n, k := c.Remembered(); n != 0 || k != 0 {
		t.Fatalf("after the memory: %d leases, order %d; want none", n, k)
	}
}
