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
