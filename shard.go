package hourglass

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// shard is one independent part of a Timer: a structure, the lock that
// guards it, and the driver goroutine that advances it. See [Timer].
type shard struct {
	t *Timer

	mu sync.Mutex
	// q holds the shard's pending timeouts. Guarded by mu.
	q queue.Queue[*Timeout]
	// running counts periodic timeouts in the middle of a run, which
	// Pending counts as pending. Guarded by mu.
	running int
	// periodic maps each live periodic timeout to its schedule. Guarded by
	// mu.
	periodic map[*Timeout]*periodic
	// stopped is set once by Timer.Stop. Guarded by mu.
	stopped bool
	// started is set when the driver goroutine is started. Guarded by mu.
	started bool
	// sleepUntil is the clock reading the driver sleeps until: 0 while it
	// is awake and will look at q again before sleeping, MaxUint64 while
	// it waits with nothing to do. A timeout due before it must wake the
	// driver. Guarded by mu.
	sleepUntil uint64
	// wakeups counts the driver's passes over q: how often it woke.
	// Guarded by mu.
	wakeups uint64

	wake chan struct{} // buffered 1: a new earliest deadline
	quit chan struct{} // closed by Stop
	done chan struct{} // closed when the driver exits
	goid atomic.Uint64 // the driver's goroutine id, for Stop from a callback

	// batch and next are the driver's: the timeouts taken from q in its
	// last pass and how many of them it has handed to the executor.
	// Stop reads them only on the driver's own goroutine.
	batch   []*Timeout
	next    int
	collect func(*queue.Entry[*Timeout]) // sh.take as a func, made once

	_ [64]byte // keep shards' locks on different cache lines
}

func (sh *shard) init(t *Timer, q queue.Queue[*Timeout]) {
	sh.t = t
	sh.q = q
	sh.periodic = make(map[*Timeout]*periodic)
	sh.wake = make(chan struct{}, 1)
	sh.quit = make(chan struct{})
	sh.done = make(chan struct{})
	sh.collect = sh.take
}

// add queues to at when and reports whether the driver must be woken. It
// starts the driver on the shard's first timeout. sh.mu must be held.
func (sh *shard) add(to *Timeout, when uint64) (wake bool) {
	sh.q.Add(&to.entry, when)
	to.setStatus(statusPending)
	if !sh.started {
		sh.started = true
		go sh.drive()
		return false
	}
	if when < sh.sleepUntil {
		sh.sleepUntil = 0 // one wake-up is enough until the driver looks again
		return true
	}
	return false
}

// wakeDriver tells a sleeping driver that a timeout is due earlier than it
// planned. It never blocks.
func (sh *shard) wakeDriver() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// cancel stops to if it is pending or a periodic timeout with runs left,
// reporting whether it did. sh.mu must be held.
func (sh *shard) cancel(to *Timeout) bool {
	switch to.status() {
	case statusPending:
		sh.q.Remove(&to.entry)
	case statusRunning:
		sh.running--
	default:
		return false
	}
	to.setStatus(statusCancelled)
	sh.end(to)
	return true
}

// end forgets a timeout that will not run again. sh.mu must be held.
func (sh *shard) end(to *Timeout) {
	if to.periodic() {
		delete(sh.periodic, to)
	}
	sh.t.release()
}

// reset implements Timeout.Reset. sh.mu must be held.
func (sh *shard) reset(to *Timeout, when uint64) (pending, wake bool) {
	if sh.stopped {
		return false, false
	}
	switch to.status() {
	case statusPending:
		sh.q.Remove(&to.entry)
		return true, sh.add(to, when)
	case statusRunning:
		sh.periodic[to].resetTo(when)
		return true, false
	case statusExpired, statusCancelled:
		if to.periodic() || !sh.t.acquire() {
			return false, false
		}
		return false, sh.add(to, when)
	}
	return false, false
}

// take is the structure's fire callback in the driver: it moves a due
// timeout to the batch. sh.mu is held.
func (sh *shard) take(e *queue.Entry[*Timeout]) {
	to := e.Value
	if to.periodic() {
		to.setStatus(statusRunning)
		sh.running++
	} else {
		to.setStatus(statusExpired)
		sh.t.release()
	}
	sh.batch = append(sh.batch, to)
}

// drive is the driver goroutine: it advances the structure to now, hands
// what is due to the executor, and sleeps until the next deadline or until
// woken. It exits when Stop closes quit.
func (sh *shard) drive() {
	sh.goid.Store(goid())
	clean := false
	defer func() {
		if !clean {
			// A callback called runtime.Goexit on this goroutine (t.FailNow
			// in a test, say). Carry on with a new driver, which first
			// hands over the rest of the batch.
			go sh.drive()
			return
		}
		close(sh.done)
	}()
	var sleep *time.Timer
	for {
		sh.handOver()
		sh.mu.Lock()
		if sh.stopped {
			sh.mu.Unlock()
			break
		}
		sh.wakeups++
		now := sh.t.now()
		sh.q.Advance(now, sh.collect)
		next, ok := sh.q.Next()
		switch {
		case len(sh.batch) > 0 || (ok && next <= now):
			sh.sleepUntil = 0
		case ok:
			sh.sleepUntil = next
		default:
			sh.sleepUntil = math.MaxUint64
		}
		until := sh.sleepUntil
		sh.mu.Unlock()

		switch until {
		case 0:
			continue
		case math.MaxUint64:
			select {
			case <-sh.wake:
			case <-sh.quit:
			}
			continue
		}
		d := time.Duration(min(until-now, math.MaxInt64))
		if sleep == nil {
			sleep = time.NewTimer(d)
		} else {
			sleep.Reset(d)
		}
		select {
		case <-sleep.C:
		case <-sh.wake:
			sleep.Stop()
		case <-sh.quit:
		}
	}
	if sleep != nil {
		sleep.Stop()
	}
	clean = true
}

// handOver passes the batch to the executor, one timeout at a time. A
// periodic timeout cancelled since it was taken is skipped: its Cancel
// returned true, so no run may start after it.
func (sh *shard) handOver() {
	for sh.next < len(sh.batch) {
		to := sh.batch[sh.next]
		sh.batch[sh.next] = nil
		sh.next++
		if to.periodic() && to.status() != statusRunning {
			continue
		}
		sh.t.execute(to)
	}
	sh.next = 0
	if cap(sh.batch) > 1<<16 {
		sh.batch = nil // do not keep a burst's worth of memory for ever
	} else {
		sh.batch = sh.batch[:0]
	}
}

// stop implements Timer.Stop for one shard, appending what it cancels to
// out. self is the calling goroutine's id.
func (sh *shard) stop(out []*Timeout, self uint64) []*Timeout {
	sh.mu.Lock()
	sh.stopped = true
	started := sh.started
	if started && sh.goid.Load() == self {
		// Stop runs in a callback on this shard's driver: the rest of the
		// driver's batch has not been handed over, so it never runs. A
		// timeout of the batch that a callback has already re-armed is
		// pending again and is taken with the structure's below.
		for _, to := range sh.batch[sh.next:] {
			if s := to.status(); s == statusExpired || s == statusRunning {
				to.setStatus(statusCancelled)
				out = append(out, to)
			}
		}
		clear(sh.batch[sh.next:])
		sh.batch = sh.batch[:sh.next]
	}
	sh.q.Advance(math.MaxUint64, func(e *queue.Entry[*Timeout]) {
		e.Value.setStatus(statusCancelled)
		out = append(out, e.Value)
	})
	for to := range sh.periodic {
		if to.status() == statusRunning {
			to.setStatus(statusCancelled)
		}
	}
	clear(sh.periodic)
	sh.running = 0
	sh.mu.Unlock()
	if started {
		close(sh.quit)
	}
	return out
}
