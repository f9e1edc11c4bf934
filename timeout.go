package hourglass

import (
	"sync/atomic"
	"time"
)

// Timeout is the handle of one scheduled callback, returned by the
// scheduling methods of [Timer]. Its methods are safe for concurrent use.
//
// A one-shot timeout ends exactly one way: its callback is handed to the
// executor once, or one [Timeout.Cancel] returns true, or [Timer.Stop]
// returns it. [Timeout.Reset] starts it over.
type Timeout struct {
	f  func() // what the executor runs; for a periodic timeout, its run method
	sh *shard
	// when is the deadline it was last scheduled for, and id its id in
	// sh.q while it is pending there, or unfiled while it waits in the
	// driver's inbox (flagUnfiled). Guarded by sh.mu.
	when uint64
	id   int32
	// state is written under sh.mu, except for two moves made with
	// CompareAndSwap without sh.mu: the driver's from statusFiring
	// (leaveFiring), and Cancel's of a one-shot timeout still in the
	// inbox, from statusPending|flagUnfiled to statusCancelled. So every
	// change from either of those states is a CompareAndSwap. Cancelled
	// and Expired read it without sh.mu. It is accessed with sync/atomic's
	// functions, but for its first value, set in the literal of a new
	// Timeout before any other goroutine can see it: an atomic store is an
	// exchange on amd64, a few ns saved on the path of every schedule.
	state int32
}

// Timeout states. A one-shot timeout moves pending → firing → expired, or
// ends cancelled. A periodic timeout is flagged so the driver knows to
// bring it back; its status moves pending → firing → running → pending
// ... and ends cancelled or done. A firing timeout has been taken from the
// structure into the driver's batch and not yet handed to the executor:
// until the driver claims it (firing → expired or running), Cancel,
// Reset and Stop can still keep it from running.
const (
	statusPending   = 1 // in the shard's structure
	statusRunning   = 2 // periodic: handed to the executor; re-armed when the run ends
	statusExpired   = 3 // one-shot: handed to the executor
	statusCancelled = 4 // Cancel won, or Stop took it
	statusDone      = 5 // periodic: its schedule ended
	statusFiring    = 6 // in the driver's batch, not yet handed over

	statusMask   = 0x7
	flagPeriodic = 0x8
	// flagDue marks a timeout scheduled with a deadline that had already
	// come (a d of zero or less): the structure gets it as due at reading
	// 0, so that it fires on the driver's next pass, since a wheel rounds
	// a deadline up to its next tick boundary, which may be a whole tick
	// away. when keeps the real deadline, for Deadline.
	flagDue = 0x10
	// flagValue marks the *Timeout Stop returns for a value timeout (one
	// scheduled through a Batch or Arm, see handle.go) never run: no
	// caller held it before.
	flagValue = 0x20
	// flagUnfiled marks a pending timeout that waits in the driver's
	// inbox (its id is unfiled): the shard's file clears it, with a
	// CompareAndSwap, as it files the timeout. Until then a one-shot
	// timeout is in no structure, and Cancel ends it with one
	// CompareAndSwap and no lock (see Cancel).
	flagUnfiled = 0x40
)

func (to *Timeout) load() int32       { return atomic.LoadInt32(&to.state) }
func (to *Timeout) store(s int32)     { atomic.StoreInt32(&to.state, s) }
func (to *Timeout) status() int32     { return to.load() & statusMask }
func (to *Timeout) periodic() bool    { return to.load()&flagPeriodic != 0 }
func (to *Timeout) setStatus(s int32) { to.store(to.load()&^statusMask | s) }

// leaveFiring moves a firing timeout to status s and reports whether it
// was firing: the driver and the holders of sh.mu race for it, and only
// one wins.
func (to *Timeout) leaveFiring(s int32) bool {
	for {
		old := to.load()
		if old&statusMask != statusFiring {
			return false
		}
		if atomic.CompareAndSwapInt32(&to.state, old, old&^statusMask|s) {
			return true
		}
	}
}

// cancelUnfiled moves a one-shot timeout that waits in the inbox to
// statusCancelled and reports whether it did: Cancel, without sh.mu, and
// the holders of sh.mu (file, cancel, reset) race for such a timeout,
// and only one wins.
func (to *Timeout) cancelUnfiled() bool {
	for {
		old := to.load()
		if old&(statusMask|flagUnfiled|flagPeriodic) != statusPending|flagUnfiled {
			return false
		}
		if atomic.CompareAndSwapInt32(&to.state, old, old&^(statusMask|flagUnfiled)|statusCancelled) {
			return true
		}
	}
}

// setDeadline sets the deadline of a pending timeout, due telling
// whether it has already come (see flagDue), and reports true; or
// reports false, changing nothing, if the timeout is no longer pending
// (Cancel has ended it meanwhile, without sh.mu). sh.mu must be held.
func (to *Timeout) setDeadline(when uint64, due bool) bool {
	for {
		old := to.load()
		if old&statusMask != statusPending {
			return false
		}
		s := old &^ flagDue
		if due {
			s |= flagDue
		}
		if atomic.CompareAndSwapInt32(&to.state, old, s) {
			to.when = when
			return true
		}
	}
}

// filedAt is the deadline the structure gets: when, or 0 for a timeout
// due at once. sh.mu must be held.
func (to *Timeout) filedAt() uint64 {
	if to.load()&flagDue != 0 {
		return 0
	}
	return to.when
}

// Cancel stops the timeout and reports whether this call prevented a run:
// true if it was pending, or, for a periodic timeout, if any run remained
// (a run in progress finishes; no further run starts). It does not wait
// for a callback that is already running. Cancel is O(1) for the wheels
// and the list and O(log n) for the heap.
//
// A one-shot timeout cancelled before its shard files it (a request that
// completed in time: see Timer) is ended with one CompareAndSwap, without
// the shard's lock; the shard drops it when it files its inbox.
func (to *Timeout) Cancel() bool {
	sh := to.sh
	if sh == nil {
		return false
	}
	if to.cancelUnfiled() {
		sh.limit.release()
		return true
	}
	sh.mu.Lock()
	ok := sh.cancel(to)
	sh.mu.Unlock()
	return ok
}

// Reset moves the timeout to run d from now and reports whether it was
// pending, like time.Timer.Reset: the old deadline never fires. A one-shot
// timeout that has already expired or been cancelled is scheduled again,
// unless the Timer is stopped or at its [WithMaxPending] limit, in which
// case Reset does nothing and returns false. For a periodic timeout, Reset
// moves the next run (after the current one, if a run is in progress) and
// later runs follow from it; an ended periodic timeout stays ended.
//
// Moving a pending timeout later is O(1) and touches only the timeout: the
// structure keeps it where it was filed and files it again when the old
// deadline comes, so a deadline pushed back on every event costs one
// re-filing per timeout period, not one relink per event.
func (to *Timeout) Reset(d time.Duration) bool {
	sh := to.sh
	if sh == nil {
		return false
	}
	now := sh.now()
	sh.mu.Lock()
	pending, wake := sh.reset(to, after(now, d), d <= 0)
	late := sh.overslept(now)
	sh.mu.Unlock()
	sh.settle(wake, late)
	return pending
}

// Cancelled reports whether the timeout was cancelled, by [Timeout.Cancel]
// or by [Timer.Stop].
func (to *Timeout) Cancelled() bool { return to.status() == statusCancelled }

// Expired reports whether a one-shot timeout has been handed to the
// executor (its callback may still be running), or whether a periodic
// timeout's schedule has ended.
func (to *Timeout) Expired() bool {
	s := to.status()
	return s == statusExpired || s == statusDone
}

// Deadline reports when the timeout will run, or, once it has run or been
// cancelled, when it was last due to run. For a periodic timeout that is
// the current or next run. A timeout scheduled with a d of zero or less is
// due at the instant it was scheduled (and runs at once); one scheduled
// with [Timer.AtFunc] for a time before the Timer was made is due when the
// Timer was made. A Timer holds deadlines up to 2·math.MaxInt64 ns, about
// 584 years, after it was made; a later one (AtFunc in the year 9999)
// saturates there: the timeout would run then, and Deadline reports that
// instant.
func (to *Timeout) Deadline() time.Time {
	sh := to.sh
	if sh == nil {
		return time.Time{}
	}
	sh.mu.Lock()
	when := to.when
	sh.mu.Unlock()
	return sh.timeOf(when)
}
