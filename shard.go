package hourglass

// shard is one independent part of a Timer: a structure, the lock that
// guards it, and the driver goroutine that advances it. See [Timer].
type shard struct {
	driver // mu guards the fields below as well

	t *Timer
	// q holds the shard's pending timeouts by id, and ids hands the ids
	// out. Guarded by mu.
	q   keyQueue[*Timeout]
	ids ids
	// unfiled holds the timeouts scheduled since q was last brought up
	// to date, in order: see file. Guarded by mu.
	unfiled []*Timeout
	// running counts periodic timeouts in the middle of a run, which
	// Pending counts as pending. Guarded by mu.
	running int
	// periodic maps each live periodic timeout to its schedule. Guarded by
	// mu.
	periodic map[*Timeout]*periodic

	// batch and next are the driver's: the timeouts taken from q in its
	// last pass and how many of them it has handed to the executor.
	// Stop reads them only on the driver's own goroutine.
	batch   []*Timeout
	next    int
	collect func(id int32, to *Timeout) // sh.take as a func, made once

	_ [64]byte // keep shards' locks on different cache lines
}

func (sh *shard) init(t *Timer, q keyQueue[*Timeout]) {
	sh.driver.init(sh)
	sh.t = t
	sh.q = q
	sh.periodic = make(map[*Timeout]*periodic)
	sh.collect = sh.take
}

// add makes to pending at when, due telling whether when has already
// come (see flagDue), and reports whether the driver must be woken with
// wakeUp once sh.mu is released. to goes to sh.unfiled, and into q when
// file runs. sh.mu must be held.
func (sh *shard) add(to *Timeout, when uint64, due bool) (wake bool) {
	to.id = unfiled
	to.setDeadline(when, due)
	to.setStatus(statusPending)
	if sh.unfiled = append(sh.unfiled, to); len(sh.unfiled) == fileBatch {
		sh.file()
	}
	return sh.armed(when)
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
			to.id = sh.ids.alloc()
			sh.q.Add(to.id, to.filedAt(), to)
		}
	}
	clear(sh.unfiled) // let the timeouts go
	sh.unfiled = sh.unfiled[:0]
}

// cancel stops to if it is pending or a periodic timeout with runs left,
// reporting whether it did. sh.mu must be held.
func (sh *shard) cancel(to *Timeout) bool {
	switch to.status() {
	case statusPending:
		if to.id != unfiled {
			sh.q.Remove(to.id)
			sh.ids.release(to.id)
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
	switch to.status() {
	case statusPending:
		// The default wheel records a later deadline without relinking
		// (see queue.IndexWheel.Move).
		to.setDeadline(when, due)
		if to.id != unfiled {
			sh.q.Move(to.id, to.filedAt())
		}
		return true, sh.armed(when)
	case statusRunning:
		sh.periodic[to].resetTo(when, due)
		return true, false
	case statusExpired, statusCancelled:
		if to.periodic() || !sh.t.acquire() {
			return false, false
		}
		return false, sh.add(to, when, due)
	}
	return false, false
}

// take is the structure's fire callback in the driver: it moves a due
// timeout to the batch. sh.mu is held.
func (sh *shard) take(id int32, to *Timeout) {
	sh.ids.release(id)
	if to.periodic() {
		to.setStatus(statusRunning)
		sh.running++
	} else {
		to.setStatus(statusExpired)
		sh.t.release()
	}
	sh.batch = append(sh.batch, to)
}

// pass implements worker: the structure's due timeouts go to the batch.
func (sh *shard) pass(now uint64) (uint64, bool) {
	sh.file()
	sh.q.Advance(now, sh.collect)
	return sh.q.Next()
}

func (sh *shard) busy() bool  { return len(sh.batch) > 0 }
func (sh *shard) now() uint64 { return sh.t.now() }

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
		sh.t.run(to.f)
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
	defer sh.mu.Unlock()
	if sh.started && sh.isDriver(self) {
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
	sh.file()
	sh.q.Drain(func(id int32, to *Timeout) {
		sh.ids.release(id)
		to.setStatus(statusCancelled)
		out = append(out, to)
	})
	for to := range sh.periodic {
		if to.status() == statusRunning {
			to.setStatus(statusCancelled)
		}
	}
	clear(sh.periodic)
	sh.running = 0
	sh.driver.stop()
	return out
}
