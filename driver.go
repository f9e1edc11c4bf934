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

	wake chan struct{} // buffered 1: a new earliest deadline
	quit chan struct{} // closed by Stop
	done chan struct{} // closed when the goroutine exits
	goid atomic.Uint64 // the goroutine's id, for Stop from a callback

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
	// handOver hands the batch to the executor. d.mu is not held; it runs
	// on the driver goroutine.
	handOver()
	// now reads the structure's clock.
	now() uint64
}

func (d *driver) init(w worker) {
	d.w = w
	d.wake = make(chan struct{}, 1)
	d.quit = make(chan struct{})
	d.done = make(chan struct{})
}

// armed is called after a deadline at when is added, with d.mu held. It
// starts the goroutine on the first deadline and reports whether the
// goroutine sleeps past when and must be woken with wakeUp after d.mu is
// released.
func (d *driver) armed(when uint64) (wake bool) {
	if !d.started {
		d.started = true
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
	d.goid.Store(goid())
	clean := false
	defer func() {
		if !clean {
			// A callback called runtime.Goexit on this goroutine (t.FailNow
			// in a test, say). Carry on with a new goroutine, which first
			// hands over the rest of the batch.
			go d.run()
			return
		}
		close(d.done)
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

// isDriver reports whether goroutine self is d's goroutine.
func (d *driver) isDriver(self uint64) bool { return d.goid.Load() == self }

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

// wait waits for d's goroutine to exit, unless it is goroutine self (a
// callback on the driver calling Stop), which cannot wait for itself.
func (d *driver) wait(self uint64) {
	d.mu.Lock()
	started := d.started
	d.mu.Unlock()
	if started && !d.isDriver(self) {
		<-d.done
	}
}
