package hourglass

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// driver is the goroutine behind a Timer shard or a Keyed: it advances its
// worker's structure to now, hands what is due to the executor, and sleeps
// until the next deadline or until woken by an earlier one. It is started
// by the first deadline, so an unused Timer has no goroutine, and with
// nothing pending it waits on channels only: no wake-ups at all.
type driver struct {
	mu sync.Mutex
	// stopped is set once by Stop. Guarded by mu.
	stopped bool
	// started is set when the goroutine is started. Guarded by mu.
	started bool
	// sleepUntil is the clock reading the goroutine sleeps until: 0 while
	// it is awake and will look at the structure again before sleeping,
	// MaxUint64 while it waits with nothing to do. A deadline before it
	// must wake the goroutine. Guarded by mu.
	sleepUntil uint64
	// wakeups counts passes over the structure. Guarded by mu.
	wakeups uint64

	// next is how far the goroutine has got in handing its batch over:
	// entries below next are claimed, handed over or being handed, and the
	// rest wait. The goroutine claims them one at a time with an atomic
	// add, without mu; Stop, holding mu, claims all the rest with one
	// swap (takeRest). So each entry is either handed over or returned by
	// Stop, never both, and neither waits for the other: Stop needs no
	// way to tell whether it runs on the goroutine, in a callback.
	next atomic.Int64

	wake  chan struct{} // buffered 1: a new earliest deadline
	quit  chan struct{} // closed by Stop
	exits *exits        // told when the goroutine starts and exits

	w worker
}

// worker is what a driver drives: a structure with its batch of due work.
type worker interface {
	// pass advances the structure to now and moves what is due into the
	// batch. It reports the next time worth waking for (ok is false when
	// nothing is pending). d.mu is held.
	pass(now uint64) (next uint64, ok bool)
	// busy reports whether the batch holds work. d.mu is held.
	busy() bool
	// handOver hands the batch to the executor, claiming each entry
	// first (see next). d.mu is not held; it runs on the driver goroutine.
	handOver()
	// now reads the structure's clock.
	now() uint64
}

func (d *driver) init(w worker, e *exits) {
	d.w = w
	d.wake = make(chan struct{}, 1)
	d.quit = make(chan struct{})
	d.exits = e
}

// exits counts the driver goroutines of a Timer (or of a Keyed) still to
// exit, plus one until Stop, and closes done when the count reaches zero:
// once Stop has been called and every started goroutine has exited. It
// is what Done returns. Stop itself never waits for a goroutine, since it
// may be running on one.
type exits struct {
	n    atomic.Int64
	done chan struct{}
}

func newExits() *exits {
	e := &exits{done: make(chan struct{})}
	e.n.Store(1) // Stop's
	return e
}

func (e *exits) started() { e.n.Add(1) }

// exited counts one goroutine out, or Stop's one.
func (e *exits) exited() {
	if e.n.Add(-1) == 0 {
		close(e.done)
	}
}

// claim claims the next entry of a batch of n for hand-over and returns
// its index, or reports false when none is left: all handed over, or
// Stop took the rest. Only the goroutine calls it.
func (d *driver) claim(n int) (int, bool) {
	i := d.next.Add(1) - 1
	return int(i), i < int64(n)
}

// takeRest claims every entry of a batch of n that the goroutine has not
// and returns the index of the first: Stop returns them as never run.
// d.mu is held.
func (d *driver) takeRest(n int) int {
	return int(min(d.next.Swap(int64(n)), int64(n)))
}

// resetBatch readies next for a new batch. d.mu is held, on the
// goroutine, so neither claim nor takeRest can run meanwhile.
func (d *driver) resetBatch() { d.next.Store(0) }

// armed is called after a deadline at when is added, with d.mu held. It
// starts the goroutine on the first deadline and reports whether the
// goroutine sleeps past when and must be woken with wakeUp after d.mu is
// released.
func (d *driver) armed(when uint64) (wake bool) {
	if !d.started {
		d.started = true
		d.exits.started()
		go d.run()
		return false
	}
	if when < d.sleepUntil {
		d.sleepUntil = 0 // one wake-up is enough until the driver looks again
		return true
	}
	return false
}

// wakeUp tells a sleeping goroutine that a deadline is earlier than it
// planned. It never blocks.
func (d *driver) wakeUp() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run is the driver goroutine. It exits when Stop closes quit.
func (d *driver) run() {
	clean := false
	defer func() {
		if !clean {
			// A callback called runtime.Goexit on this goroutine (t.FailNow
			// in a test, say). Carry on with a new goroutine, which first
			// hands over the rest of the batch.
			go d.run()
			return
		}
		d.exits.exited()
	}()
	var sleep *time.Timer
	for {
		d.w.handOver()
		d.mu.Lock()
		if d.stopped {
			d.mu.Unlock()
			break
		}
		d.wakeups++
		now := d.w.now()
		next, ok := d.w.pass(now)
		switch {
		case d.w.busy() || (ok && next <= now):
			d.sleepUntil = 0
		case ok:
			d.sleepUntil = next
		default:
			d.sleepUntil = math.MaxUint64
		}
		until := d.sleepUntil
		d.mu.Unlock()

		switch until {
		case 0:
			continue
		case math.MaxUint64:
			select {
			case <-d.wake:
			case <-d.quit:
			}
			continue
		}
		wait := time.Duration(min(until-now, math.MaxInt64))
		if sleep == nil {
			sleep = time.NewTimer(wait)
		} else {
			sleep.Reset(wait)
		}
		select {
		case <-sleep.C:
		case <-d.wake:
			sleep.Stop()
		case <-d.quit:
		}
	}
	if sleep != nil {
		sleep.Stop()
	}
	clean = true
}

// stop marks d stopped and tells its goroutine to exit. d.mu must be held.
func (d *driver) stop() {
	if d.stopped {
		return
	}
	d.stopped = true
	if d.started {
		close(d.quit)
	}
}
