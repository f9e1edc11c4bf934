package queue_test

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// This event loop drives a Queue over the hierarchical wheel as a timer's
// driver goroutine does, except that where a driver sleeps until Next and
// reads its clock, the loop sets now to Next. Some wake-ups fire nothing:
// they are cascades, which move entries to lower levels of the wheel.
func ExampleQueue() {
	const ms = uint64(time.Millisecond)
	q := queue.New[string](queue.HierarchicalWheel(time.Millisecond))
	retry := q.Add(250*ms, "retry request")
	q.Add(3000*ms, "close idle connection")
	q.Add(1000*ms, "heartbeat")
	// The request is answered before its retry is due.
	q.Remove(retry)

	beats, wakeups := 0, 0
	for {
		next, ok := q.Next()
		if !ok {
			break // nothing queued: a driver sleeps until an Add
		}
		now := next
		wakeups++
		q.Advance(now, func(_ int32, what string) {
			fmt.Printf("%v: %s\n", time.Duration(now), what)
			if what == "heartbeat" && beats < 2 {
				beats++
				q.Add(now+1000*ms, what) // periodic: re-arm from the fire callback
			}
		})
	}
	fmt.Println("wake-ups:", wakeups)
	// Output:
	// 1s: heartbeat
	// 2s: heartbeat
	// 3s: close idle connection
	// 3s: heartbeat
	// wake-ups: 5
}

// A KeyQueue keeps one idle deadline per connection, pushed back on every
// packet. Pushing a deadline back only records it; the connection is
// filed again when its old slot comes due, so the loop below wakes at
// 30 s for "b" and finds it moved to 40 s.
func ExampleKeyQueue() {
	const s = uint64(time.Second)
	w := queue.NewKeyQueue[string](queue.HierarchicalWheel(time.Millisecond))
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
