package hourglass

import (
	"sync/atomic"

	"github.com/hourglass-go/hourglass/queue"
)

// shard is one independent part of a Timer: a driver (its lock, clock,
// goroutine and batches) over a [queue.Queue] of timeouts. See [Timer].
// It is the driver's worker: it files new timeouts, collects due ones and
// delivers them; the driver decides when.
type shard struct {
	driver[*Timeout, *Timeout] // mu guards the fields below as well

	limit *limit // the Timer's
	// q holds the shard's pending timeouts by id. Timeouts scheduled
	// since the last pass wait in the driver's inbox first, with id
	// unfiled (see batchSize). Guarded by mu.
	q *queue.Queue[*Timeout]
	// running counts periodic timeouts in the middle of a run, which
	// Pending counts as pending. Guarded by mu.
	running int
	// periodic maps each live periodic timeout to its schedule. Guarded by
	// mu.
	periodic map[*Timeout]*periodic

	// values holds the shard's value timeouts, those scheduled through a
	// Batch, by id; nil until the first (see handle.go). gen is the
	// generation of the last one made. Guarded by mu.
	values *queue.Queue[valueEntry]
	gen    uint32
	// shells are *Timeout values for due value timeouts to travel in
	// (see recycle). Used only by the driver goroutine.
	shells []*Timeout

	structure queue.Structure // what q and values run
	index     uint32          // in the Timer's shards, for Handle

	collect      func(id int32, to *Timeout)  // sh.take as a func, made once
	collectValue func(id int32, e valueEntry) // sh.takeValue, likewise
	// out hands the batch's callbacks to the executor. Used only by the
	// driver goroutine.
	out handOff[func()]

	_ [64]byte // keep shards' locks on different cache lines
}

func (sh *shard) init(index int, c *config, cl clock, l *limit, e *exits, waiting *atomic.Int64) {
	sh.driver.init(sh, cl, newRunner(c, waiting), e)
	sh.limit = l
	sh.structure = c.queue
	sh.index = uint32(index)
	sh.q = queue.New[*Timeout](c.queue)
	sh.periodic = make(map[*Timeout]*periodic)
	sh.collect = sh.take
	sh.collectValue = sh.takeValue
	sh.out = newHandOff(&sh.runner, invoke)
}

// unfiled is the id of a pending timeout that is still in the inbox.
const unfiled = -1

// schedule queues new timeout to, due at to.when, periodic with schedule
// p if p is not nil; now is the clock reading to.when counts from. It
// returns ErrStopped after Stop.
func (sh *shard) schedule(to *Timeout, p *periodic, now uint64) error {
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		return ErrStopped
	}
	if p != nil {
		sh.periodic[to] = p
	}
	sh.put(to)
	wake := sh.armed(to.when)
	late := sh.overslept(now)
	sh.mu.Unlock()
	sh.settle(wake, late)
	return nil
}

// add makes to pending again at when, due telling whether when has
// already come (see flagDue), and reports whether the driver must be
// woken with wakeUp once sh.mu is released. sh.mu must be held.
func (sh *shard) add(to *Timeout, when uint64, due bool) (wake bool) {
	to.id = unfiled
	to.when = when
	to.store(pendingState(to.load()&flagPeriodic, due))
	sh.put(to)
	return sh.armed(when)
}

// pendingState is the state of a timeout made pending, with the flags
// kept (flagPeriodic) and flagDue set if due.
func pendingState(flags int32, due bool) int32 {
	s := flags | statusPending
	if due {
		s |= flagDue
	}
	return s
}

// file implements worker: it puts the pending timeouts of the inbox into
// q. One cancelled meanwhile, or filed through an earlier entry (Cancel
// and Reset schedule a timeout again), is dropped. sh.mu is held.
func (sh *shard) file(in []*Timeout) {
	for _, to := range in {
		if to.id == unfiled && to.status() == statusPending {
			to.id = sh.q.Add(to.filedAt(), to)
		}
	}
}

// cancel stops to if it is pending, firing (not yet handed over) or a
// periodic timeout with runs left, reporting whether it did. sh.mu must
// be held.
func (sh *shard) cancel(to *Timeout) bool {
	switch to.status() {
	case statusFiring:
		// The driver may claim it meanwhile; if it does, it runs.
		if !to.leaveFiring(statusCancelled) {
			return sh.cancel(to)
		}
		if to.periodic() {
			sh.running--
		}
		sh.end(to)
		return true
	case statusPending:
		if to.id != unfiled {
			sh.q.Remove(to.id)
		}
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
	sh.limit.release()
}

// reset implements Timeout.Reset, due telling whether when has already
// come. sh.mu must be held.
func (sh *shard) reset(to *Timeout, when uint64, due bool) (pending, wake bool) {
	if sh.stopped {
		return false, false
	}
	if to.periodic() {
		// A periodic timeout firing or running: the run after this one.
		if s := to.status(); s == statusFiring || s == statusRunning {
			sh.periodic[to].resetTo(when, due)
			return true, false
		}
	} else if to.leaveFiring(statusPending) {
		// Taken from the structure but not yet handed over: it still holds
		// its place under the limit, and its run is called off.
		return true, sh.add(to, when, due)
	}
	switch to.status() {
	case statusPending:
		// The default wheel records a later deadline without relinking
		// (see queue.Queue.Move).
		to.setDeadline(when, due)
		if to.id != unfiled {
			sh.q.Move(to.id, to.filedAt())
		}
		return true, sh.armed(when)
	case statusExpired, statusCancelled:
		if to.periodic() || !sh.limit.acquire() {
			return false, false
		}
		return false, sh.add(to, when, due)
	}
	return false, false
}

// advance implements worker: the structures' due timeouts go to the
// driver's batch (take, takeValue), and the next time worth waking for
// is the earlier of theirs.
func (sh *shard) advance(now uint64) (uint64, bool) {
	sh.q.Advance(now, sh.collect)
	next, ok := sh.q.Next()
	if sh.values != nil {
		sh.values.Advance(now, sh.collectValue)
		if v, vok := sh.values.Next(); vok && (!ok || v < next) {
			next, ok = v, true
		}
	}
	return next, ok
}

// take is the structure's fire callback: it moves a due timeout to the
// batch, firing. A periodic one counts as running from here. sh.mu is
// held.
func (sh *shard) take(_ int32, to *Timeout) {
	to.setStatus(statusFiring)
	if to.periodic() {
		sh.running++
	}
	sh.due(to)
}

// deliver implements worker: it hands a due timeout to the executor
// (through sh.out, see handOff), unless Cancel or Reset has called its
// run off (it is no longer firing).
func (sh *shard) deliver(to *Timeout) {
	s := to.load()
	if s&flagPeriodic != 0 {
		if !to.leaveFiring(statusRunning) {
			return // cancelled, or taken by Stop
		}
	} else {
		if !to.leaveFiring(statusExpired) {
			return // cancelled, reset, or taken by Stop
		}
		sh.limit.release() // its place under the limit
	}
	sh.out.add(to.f)
	if s&flagValue != 0 {
		sh.recycle(to) // a value timeout's shell, which no caller holds
	}
}

// handedOver implements worker: the batch is handed over.
func (sh *shard) handedOver() { sh.out.flush() }

// rerun is a periodic timeout's callback (periodic.run): one run of p.f,
// then the timeout is filed again for the run p.next gives, unless it was
// cancelled, the Timer stopped, or the schedule ended.
func (sh *shard) rerun(p *periodic) {
	sh.call(p.f)

	sh.mu.Lock()
	defer sh.mu.Unlock()
	to := p.to
	if to.status() != statusRunning {
		return // cancelled during the run, or stopped
	}
	sh.running--
	next, due, ok := p.next(to.when, sh.clock)
	if !ok {
		to.setStatus(statusDone)
		sh.end(to)
		return
	}
	if sh.add(to, next, due) {
		sh.wakeUp()
	}
}

// pending reports the timeouts that will still run: the queued ones,
// value timeouts included, and the periodic ones in a run. sh.mu must be
// held.
func (sh *shard) pending() int {
	sh.flush()
	n := sh.q.Len() + sh.running
	if sh.values != nil {
		n += sh.values.Len()
	}
	return n
}

// stop implements Timer.Stop for one shard, appending what it cancels to
// out. It may run on any goroutine, the driver's own included (a callback
// calling Stop), and waits for none.
func (sh *shard) stop(out []*Timeout) []*Timeout {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// The part of the driver's batch not yet handed over never runs. A
	// timeout of the batch that Reset has moved is pending again and is
	// taken with the structure's below.
	sh.halt(func(to *Timeout) {
		if to.leaveFiring(statusCancelled) {
			out = append(out, to)
		}
	})
	sh.q.Drain(func(_ int32, to *Timeout) {
		to.setStatus(statusCancelled)
		out = append(out, to)
	})
	out = sh.drainValues(out)
	for to := range sh.periodic {
		switch {
		case to.leaveFiring(statusCancelled):
			// In a slot the driver has claimed but not yet handed over:
			// this run never starts.
			out = append(out, to)
		case to.status() == statusRunning:
			to.setStatus(statusCancelled) // this run finishes, no other starts
		}
	}
	clear(sh.periodic)
	sh.running = 0
	return out
}
