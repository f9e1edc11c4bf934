// Command idle closes idle connections the way a server's event loop
// would with a hourglass Keyed: n connections, each with an idle timeout
// pushed back whenever it is active. Each poll of the loop finds a batch
// of connections ready and moves all their deadlines with one SetMany;
// some connections go quiet for good and are closed when their timeout
// expires, never before. It prints how many moves the loop made and what
// they cost, and checks that every quiet connection was closed once and
// none early.
//
//	go run ./examples/idle [-n 100000] [-quiet 0.01] [-timeout 300ms] [-for 1s] [-batch 64]
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass"
)

func main() {
	n := flag.Int("n", 100_000, "connections")
	quiet := flag.Float64("quiet", 0.01, "fraction of connections that go quiet and must be closed")
	timeout := flag.Duration("timeout", 300*time.Millisecond, "idle timeout")
	run := flag.Duration("for", time.Second, "how long the event loop runs")
	batch := flag.Int("batch", 64, "connections ready per poll")
	flag.Parse()
	if *n < 1 || *quiet < 0 || *quiet > 1 || *timeout <= 0 || *run <= 0 || *batch < 1 {
		fmt.Fprintln(os.Stderr, "idle: need -n >= 1, 0 <= -quiet <= 1, -timeout > 0, -for > 0 and -batch >= 1")
		flag.Usage()
		os.Exit(2)
	}

	// The quiet connections are the first q; they are never active after
	// the start.
	q := int(float64(*n) * *quiet)
	var mu sync.Mutex
	closes := make([]int, *n)  // guarded by mu
	early, quietCloses := 0, 0 // guarded by mu
	start := time.Now()
	// Closing here is a short bookkeeping step, so it runs inline on the
	// Keyed's own goroutine, which Stop waits for.
	idle := hourglass.NewKeyed(func(conn int) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		closes[conn]++
		if conn < q {
			quietCloses++
			if now.Sub(start) < *timeout {
				early++
			}
		}
	}, hourglass.WithExecutor(hourglass.Inline))

	all := make([]int, *n)
	for i := range all {
		all[i] = i
	}
	if _, err := idle.SetMany(all, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}

	// The event loop: each poll, a batch of the talkative connections is
	// ready, and their deadlines are pushed back.
	ready := make([]int, *batch)
	moves, polls := 0, 0
	loop := time.Now()
	for polls%64 != 0 || time.Since(start) < *run { // the clock every 64 polls
		if q == *n {
			time.Sleep(time.Millisecond) // nobody talks
			continue
		}
		for i := range ready {
			ready[i] = q + rand.IntN(*n-q)
		}
		if _, err := idle.SetMany(ready, *timeout); err != nil {
			fmt.Fprintln(os.Stderr, "idle:", err)
			os.Exit(1)
		}
		moves += len(ready)
		polls++
	}

	busy := time.Since(loop)

	// Let the quiet ones' timeouts pass (they are due just after
	// start+timeout and may be a tick late; allow a loaded machine a
	// second more), then stop: the talkative ones are still pending and
	// come back from Stop.
	for time.Since(start) < *timeout+time.Second {
		mu.Lock()
		done := quietCloses >= q
		mu.Unlock()
		if done && time.Since(start) > *timeout {
			break
		}
		time.Sleep(time.Millisecond)
	}
	open := idle.Stop()

	mu.Lock()
	defer mu.Unlock()
	fmt.Printf("%d connections, %d quiet, idle timeout %v, loop ran %v\n", *n, q, *timeout, *run)
	if moves > 0 {
		fmt.Printf("%d polls of %d ready connections: %d moves, %.0f ns per move (picking the ready ones included)\n",
			polls, *batch, moves, float64(busy.Nanoseconds())/float64(moves))
	}

	// Every quiet connection was closed once, none early. A talkative one
	// is ready far more often than once per timeout at the default
	// settings; one that was not (a slow machine, or few polls) lapsed
	// and was closed, which is no error.
	quietClosed, lapsed := 0, 0
	ok := early == 0
	for conn, c := range closes {
		switch {
		case conn < q && c == 1:
			quietClosed++
		case conn < q:
			fmt.Printf("quiet connection %d closed %d times\n", conn, c)
			ok = false
		case c > 0:
			lapsed++
		}
	}
	fmt.Printf("quiet connections closed: %d of %d (%d early); talkative ones lapsed: %d; open at Stop: %d\n",
		quietClosed, q, early, lapsed, len(open))
	if !ok {
		os.Exit(1)
	}
}
