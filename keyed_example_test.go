package hourglass_test

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass"
)

// Idle connection timeouts: a connection is closed when it has been quiet
// for its timeout, and every packet pushes its deadline back. The Set on
// each packet moves the connection's one pending timeout; it allocates
// nothing.
func ExampleNewKeyed() {
	closed := make(chan string)
	idle := hourglass.NewKeyed(func(conn string) { closed <- conn })
	defer idle.Stop()

	idle.Set("10.0.0.1:4000", time.Minute)
	idle.Set("10.0.0.2:4000", 20*time.Millisecond) // a short idle limit

	// A packet from 10.0.0.1 pushes its deadline back.
	before, _ := idle.Deadline("10.0.0.1:4000")
	idle.Set("10.0.0.1:4000", time.Minute)
	after, _ := idle.Deadline("10.0.0.1:4000")
	fmt.Println("pushed back:", after.After(before))

	// 10.0.0.2 stays quiet and is closed.
	fmt.Println("closed idle", <-closed)
	fmt.Println("open:", idle.Len())

	// 10.0.0.1 closes cleanly: its timeout is removed, never to fire.
	fmt.Println("removed:", idle.Remove("10.0.0.1:4000"))
	fmt.Println("open:", idle.Len())
	// Output:
	// pushed back: true
	// closed idle 10.0.0.2:4000
	// open: 1
	// removed: true
	// open: 0
}

// Stop returns the keys whose timeouts never expired, so that a shutdown
// can deal with them; a removed key is not among them.
func ExampleKeyed_Stop() {
	k := hourglass.NewKeyed(func(id int) { fmt.Println("expired", id) })
	for id := range 4 {
		k.Set(id, time.Hour)
	}
	k.Remove(2)

	pending := k.Stop()
	slices.Sort(pending)
	fmt.Println("never expired:", pending)

	err := k.Set(5, time.Second)
	fmt.Println(err, errors.Is(err, hourglass.ErrStopped))
	fmt.Println("second Stop:", k.Stop())
	// Output:
	// never expired: [0 1 3]
	// hourglass: timer stopped true
	// second Stop: []
}

// An event loop handles the connections that are ready in one pass and
// pushes all their idle deadlines back with one SetMany: one reading of
// the clock and one lock for the lot, where a Set per connection would
// take one of each per connection. With a pending limit, SetMany stops at
// the first new key that does not fit and says how many it set.
func ExampleKeyed_SetMany() {
	idle := hourglass.NewKeyed(func(fd int) {}, hourglass.WithMaxPending(4))
	defer idle.Stop()

	ready := []int{7, 9, 12} // the file descriptors one poll returned
	n, err := idle.SetMany(ready, 30*time.Second)
	fmt.Println(n, err, idle.Len())

	first, _ := idle.Deadline(7)
	last, _ := idle.Deadline(12)
	fmt.Println("one deadline for all:", first.Equal(last))

	n, err = idle.SetMany([]int{9, 15, 16, 7}, 30*time.Second)
	fmt.Println(n, err, idle.Len())
	// Output:
	// 3 <nil> 3
	// one deadline for all: true
	// 2 hourglass: too many pending timeouts 4
}
