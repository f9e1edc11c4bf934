package hourglass

import "github.com/hourglass-go/hourglass/queue"

// shard is one independent part of a Timer: a structure, the lock that
// guards it, and the driver goroutine that advances it. See [Timer].
type shard struct {
	driver // mu guards the fields below as well

	t *Timer
	// q holds the shard's pending timeouts by id. Guarded by mu.
	q *queue.Queue[*Timeout]
	// unfiled holds the timeouts scheduled since q was last brought up
	// to date, in order: see file. Guarded by mu.
	unfiled []*Timeout
	// running counts periodic timeouts in the middle of a run, which
	// Pending counts as pending. Guarded by mu.
	running int
	// periodic maps each live periodic timeout to its schedule. Guarded by
	// mu.
	periodic map[*Timeout]*periodic

	// batch holds the timeouts taken from q in the driver's last pass,
	// written under mu by the pass. The driver hands them over without mu,
	// claiming each first (driver.next); Stop, under mu, takes those not
	// yet claimed. The driver clears each entry it claims and Stop each it
	// takes, so a batch keeps no timeout alive once it has run.
	batch   []*Timeout
	collect func(id int32, to *Timeout) // sh.take as a func, made once
	// out hands the batch's callbacks to the executor. Used only by the
	// driver goroutine.
	out handOff[func()]

	_ [64]byte // keep shards' locks on different cache lines
}

func (sh *shard) init(t *Timer, q *queue.Queue[*Timeout], e *exits) {
	sh.driver.init(sh, e)
	sh.t = t
	sh.q = q
	sh.periodic = make(map[*Timeout]*periodic)
	sh.collect = sh.take
	sh.out = newHandOff(&t.runner, invoke)
}

// add makes to pending again at when, due telling whether when has
// already come (see flagDue), and reports whether the driver must be
// woken with wakeUp once sh.mu is released. sh.mu must be held.
func (sh *shard) add(to *Timeout, when uint64, due bool) (wake bool) {
	to.id = unfiled
	to.when = when
	to.store(pendingState(to.load()&flagPeriodic, due))
	return sh.enqueue(to)
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

// enqueue puts pending timeout to, with id unfiled, in sh.unfiled, and
// into q when file runs, and reports whether the driver must be woken.
// sh.mu must be held.
func (sh *shard) enqueue(to *Timeout) (wake bool) {
	if sh.unfiled = append(sh.unfiled, to); len(sh.unfiled) == fileBatch {
		sh.file()
	}
	return sh.armed(to.when)
}

// unfiled is the id of a pending timeout that is still in shard.unfiled.
const unfiled = -1

// fileBatch is how many timeouts wait in shard.unfiled before they are
// filed together. As Netty's HashedWheelTimer does with its queue of new
// timeouts, a shard files a new timeout into its structure only later, in
// a batch: when the batch is full, when the driver wakes, or when Stop or
// Stats needs the structure whole. A timeout cancelled before then (a
// request that completed in time, the common case) never touches the
// structure: its Cancel is a status change. Filing a batch in one loop
// also overlaps the cache misses that filing one at a time pays in full.
// Set in step with Keyed's batch (setBatch); 256 pointers are 2 KiB.
const fileBatch = 256

// file puts the pending timeouts of sh.unfiled into q. An entry whose
// timeout was cancelled meanwhile, or filed through an earlier entry
// (Cancel and Reset schedule a timeout again), is dropped. The driver
// files before it looks for due timeouts, so nothing due is missed: add
// wakes it for a deadline earlier than the one it sleeps until. sh.mu
// must be held.
func (sh *shard) file() {
	for _, to := range sh.unfiled {
		if to.id == unfiled && to.status() == statusPending {
			to.id = sh.q.Add(to.filedAt(), to)
		}
	}
	clear(sh.unfiled) // let the timeouts go
	sh.unfiled = sh.unfiled[:0]
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
	sh.t.release()
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
		if to.periodic() || !sh.t.acquire() {
			return false, false
		}
		return false, sh.add(to, when, due)
	}
	return false, false
}

// take is the structure's fire callback in the driver: it moves a due
// timeout to the batch, firing. A periodic one counts as running from
// here. sh.mu is held.
func (sh *shard) take(_ int32, to *Timeout) {
	to.setStatus(statusFiring)
	if to.periodic() {
		sh.running++
	}
	sh.batch = append(sh.batch, to)
}

// pass implements worker: the structure's due timeouts go to a new batch.
func (sh *shard) pass(now uint64) (uint64, bool) {
	if cap(sh.batch) > 1<<16 {
		sh.batch = nil // do not keep a burst's worth of memory for ever
	} else {
		sh.batch = sh.batch[:0]
	}
	sh.resetBatch()
	sh.file()
	sh.q.Advance(now, sh.collect)
	return sh.q.Next()
}

func (sh *shard) busy() bool  { return len(sh.batch) > 0 }
func (sh *shard) now() uint64 { return sh.t.now() }

// handOver passes the batch to the executor (through sh.out, see
// handOff), one timeout at a time, each
// slot claimed first, as Stop may take the rest meanwhile, and each
// timeout moved out of statusFiring, as Cancel or Reset may have called
// its run off.
func (sh *shard) handOver() {
	n := len(sh.batch)
	for {
		i, ok := sh.claim(n)
		if !ok {
			sh.out.flush()
			return
		}
		to := sh.batch[i]
		sh.batch[i] = nil
		if to.periodic() {
			if !to.leaveFiring(statusRunning) {
				continue // cancelled, or taken by Stop
			}
		} else {
			if !to.leaveFiring(statusExpired) {
				continue // cancelled, reset, or taken by Stop
			}
			sh.t.release() // its place under the limit
		}
		sh.out.add(to.f)
	}
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
	from := sh.takeRest(len(sh.batch))
	for _, to := range sh.batch[from:] {
		if to.leaveFiring(statusCancelled) {
			out = append(out, to)
		}
	}
	clear(sh.batch[from:])
	sh.file()
	sh.q.Drain(func(_ int32, to *Timeout) {
		to.setStatus(statusCancelled)
		out = append(out, to)
	})
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
	sh.driver.stop()
	return out
}
