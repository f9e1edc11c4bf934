package queue_test

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// This event loop drives a HierarchicalWheel as a timer's driver goroutine
// does, except that where a driver sleeps until Next and reads its clock,
// the loop sets now to Next. Some wake-ups fire nothing: they are cascades,
// which move entries to lower levels of the wheel.
func ExampleHierarchicalWheel() {
	const ms = uint64(time.Millisecond)
	w := queue.NewHierarchicalWheel[string](time.Millisecond)
	retry := queue.Entry[string]{Value: "retry request"}
	idle := queue.Entry[string]{Value: "close idle connection"}
	heartbeat := queue.Entry[string]{Value: "heartbeat"}
	w.Add(&retry, 250*ms)
	w.Add(&idle, 3000*ms)
	w.Add(&heartbeat, 1000*ms)
	// The request is answered before its retry is due.
	w.Remove(&retry)

	beats, wakeups := 0, 0
	for {
		next, ok := w.Next()
		if !ok {
			break // nothing queued: a driver sleeps until an Add
		}
		now := next
		wakeups++
		w.Advance(now, func(e *queue.Entry[string]) {
			fmt.Printf("%v: %s\n", time.Duration(now), e.Value)
			if e == &heartbeat && beats < 2 {
				beats++
				w.Add(e, now+1000*ms) // periodic: re-arm from the fire callback
			}
		})
	}
	fmt.Println("wake-ups:", wakeups)
	// Output:
	// 1s: heartbeat
	// 2s: heartbeat
	// 3s: close idle connection
	// 3s: heartbeat
	// wake-ups: 6
}

// A KeyWheel keeps one idle deadline per connection, pushed back on every
// packet. Pushing a deadline back only records it; the connection is
// filed again when its old slot comes due, so the loop below wakes at
// 30 s for "b" and finds it moved to 40 s.
func ExampleKeyWheel() {
	const s = uint64(time.Second)
	w := queue.NewKeyWheel[string](time.Millisecond)
	w.Set("a", 30*s)
	w.Set("b", 30*s)
	w.Set("c", 30*s)
	w.Set("b", 40*s) // a packet on b at 10 s
	w.Remove("c")    // c closed cleanly

	for {
		next, ok := w.Next()
		if !ok {
			break
		}
		w.Advance(next, func(conn string) {
			fmt.Printf("%v: close idle %s\n", time.Duration(next), conn)
		})
	}
	// Output:
	// 30s: close idle a
	// 40s: close idle b
}
