package hourglass_test

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// burst is how many timeouts the hand-over tests make due at once: more
// than a P's local run queue holds (256 goroutines in the runtime).
const burst = 1000

// maxStartsPerGoroutine is the most callback goroutines any one goroutine
// may start for a burst with the Goroutines executor (handOff's group
// size). Started all from the driver, a burst overflows the driver's P's
// run queue into the global queue, where the oldest callbacks wait
// behind newer ones: issue 11's burst.
const maxStartsPerGoroutine = 64

// creators records, for callbacks running on goroutines of their own,
// which goroutine started each, and holds every callback until release
// is closed, so that all of them must be running at once.
type creators struct {
	mu      sync.Mutex
	by      map[int64]int // goroutine id → callbacks it started
	running int
	release chan struct{}
}

func newCreators() *creators {
	return &creators{by: map[int64]int{}, release: make(chan struct{})}
}

// run is a callback: it notes its creator and waits for release.
func (c *creators) run() {
	id := creatorOf()
	c.mu.Lock()
	c.by[id]++
	c.running++
	c.mu.Unlock()
	<-c.release
}

// creatorOf returns the id of the goroutine that started the calling
// one, from the "created by F in goroutine N" line of its traceback; -1
// if the traceback has none.
func creatorOf() int64 {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	i := bytes.LastIndex(buf, []byte(" in goroutine "))
	if i < 0 || !bytes.Contains(buf, []byte("created by ")) {
		return -1
	}
	rest := buf[i+len(" in goroutine "):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	id, err := strconv.ParseInt(string(bytes.TrimSpace(rest)), 10, 64)
	if err != nil {
		return -1
	}
	return id
}

// check verifies a burst of n callbacks: all running at once (so each
// has a goroutine of its own) and none of the goroutines that started
// them starting more than maxStartsPerGoroutine.
func (c *creators) check(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != n {
		t.Fatalf("%d of %d callbacks running at once; want all, each on a goroutine of its own", c.running, n)
	}
	if _, ok := c.by[-1]; ok {
		t.Fatalf("a callback's traceback names no creator goroutine")
	}
	for id, started := range c.by {
		if started > maxStartsPerGoroutine {
			t.Errorf("goroutine %d started %d of the burst's %d callbacks; want at most %d per goroutine (%d creators in all)",
				id, started, n, maxStartsPerGoroutine, len(c.by))
		}
	}
}

// TestGoroutines_BurstSpreadsStarts checks how a Timer with the default
// executor hands a burst over: every callback of a batch of 1000 gets a
// goroutine of its own, but no goroutine, the driver included, starts
// more than 64 of them (see handOff).
func TestGoroutines_BurstSpreadsStarts(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1))
		c := newCreators()
		for range burst {
			must(t)(tm.AfterFunc(10*ms, c.run))
		}
		advance(10*ms + s.tolerance)
		c.check(t, burst)
		close(c.release)
		advance(0)
	})
}

// TestKeyed_GoroutinesBurstSpreadsStarts is
// TestGoroutines_BurstSpreadsStarts for a Keyed.
func TestKeyed_GoroutinesBurstSpreadsStarts(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		c := newCreators()
		k := hourglass.NewKeyed(func(int) { c.run() }, s.opt)
		t.Cleanup(func() {
			k.Stop()
			<-k.Done()
		})
		for key := range burst {
			if err := k.Set(key, 10*ms); err != nil {
				t.Fatal(err)
			}
		}
		advance(10*ms + s.tolerance)
		c.check(t, burst)
		close(c.release)
		advance(0)
	})
}

// TestGoroutines_LoneTimeoutOneGoroutine checks that a timeout firing on
// its own costs one goroutine, started by the driver, and no group
// goroutine in between: two lone timeouts, at different times, are
// started by the same goroutine.
func TestGoroutines_LoneTimeoutOneGoroutine(t *testing.T) {
	forEachStructure(t, func(t *testing.T, s structure) {
		tm := s.newTimer(t, hourglass.WithShards(1))
		ids := make(chan int64, 2)
		record := func() { ids <- creatorOf() }
		must(t)(tm.AfterFunc(10*ms, record))
		must(t)(tm.AfterFunc(time.Second, record))
		advance(time.Second + s.tolerance)
		if a, b := <-ids, <-ids; a != b || a < 0 {
			t.Errorf("lone timeouts started by goroutines %d and %d; want both by the driver", a, b)
		}
	})
}
