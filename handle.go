package hourglass

import (
	"errors"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"weak"

	"github.com/hourglass-go/hourglass/queue"
)

// Handle names a timeout scheduled by [Timer.Arm] or through a [Batch]:
// a value of 12 bytes, not a pointer, so scheduling one allocates nothing
// and a pending one costs its shard a 32-byte entry and no more. Cancel
// it with [Timer.Cancel] or, inside a batch, [Batch.Cancel]. The zero
// Handle names no timeout.
//
// A Handle is the shard, the id of the timeout's entry in that shard's
// structure, and the generation the shard gave the entry when it was
// made. Ids are reused once an entry fires or is cancelled; the
// generation is what tells a stale Handle from the timeout that now has
// its id, so cancelling a Handle whose timeout has run or been cancelled
// reports false and touches nothing. (A shard's generation is 32 bits: a
// Handle kept while the same shard makes 2^32 more value timeouts, and
// asked about when its id is reused by exactly the 2^32nd, would be
// taken for it.)
//
// A Handle is comparable and may be copied freely; it is meaningful only
// to the Timer that made it.
type Handle struct {
	shard, gen uint32
	id         int32
}

// names reports whether e, the entry with h's id, is h's timeout and not
// a later one that reuses the id.
func (h Handle) names(e *valueEntry) bool { return e.gen == h.gen }

// valueEntry is what a shard's value structure holds for a timeout
// scheduled by Arm or through a Batch: its callback and its generation (see
// Handle). Removing an entry clears it, so gen 0 is never a live one.
type valueEntry struct {
	f   func()
	gen uint32
}

// The shard's side of value timeouts. A shard keeps them in a second
// structure, sh.values, of the same kind as sh.q, made on the first
// Arm or Batch that schedules on the shard: the handle is the
// caller's value, so there is no *Timeout to hold, and sh.q's entries,
// 24 bytes with the handle pointer, stay as they are for everyone else.
// Value timeouts skip the inbox: their entries are reserved in the
// structure (queue's Reserve), queued for Cancel but in no slot, so that
// one cancelled before it is filed never reaches the wheel. A Batch,
// which already pays one lock for many, files those still pending when
// it releases the lock (FileReserved); Arm leaves its entry reserved
// until the driver's next pass, or anything else that reads the
// structure whole, files it (the driver does so before it advances, so
// the deadline is kept). An Arm cancelled before then, a request
// timeout's, costs the lock twice and no wheel: no tick, level, slot or
// links (BenchmarkPair_Netty). Cancel then needs no status to check,
// only the generation.
// The driver advances both structures on each pass (shard.advance). A
// value timeout that comes due goes to the driver's batch as a dueItem
// with no *Timeout: its callback and deadline.

// valueQueue returns sh.values, making it on the first call. sh.mu is
// held.
func (sh *shard) valueQueue() *queue.Queue[valueEntry] {
	if sh.values == nil {
		sh.values = queue.New[valueEntry](sh.structure)
		// Bring the new structure to now, so that it files deadlines
		// against the current tick rather than tick 0.
		sh.values.Advance(sh.now(), sh.takeValue)
	}
	return sh.values
}

// nextGen returns the generation of a new value timeout: Batch.AfterFunc
// reserves the timeout's entry in sh.values itself, with no call
// between. sh.mu is held.
func (sh *shard) nextGen() uint32 {
	sh.gen = max(sh.gen+1, 1) // wrapping past 0, which names no timeout
	return sh.gen
}

// cancelValue cancels the value timeout h names, reporting false if it
// is no longer in the structure: run, cancelled, taken by Stop, or taken
// into the driver's batch, from which it will run. sh.mu is held.
func (sh *shard) cancelValue(h Handle) bool {
	if sh.values == nil {
		return false
	}
	if !sh.values.RemoveIf(h.id, h.names) {
		if sh.sideEmpty() {
			return false
		}
		// It may wait in the ring, not yet filed.
		sh.drainForCancel()
		if !sh.values.RemoveIf(h.id, h.names) {
			return false
		}
	}
	sh.limit.release()
	return true
}

// takeValue is sh.values' fire callback: a due value timeout goes to the
// driver's batch as its callback and deadline, with no *Timeout. Once
// there it can no longer be cancelled (its id is free), only taken by
// Stop, which makes a *Timeout for it then (see shard.stop). A *Timeout
// made or reused for each was a store into a line out of the caches as
// often as not, the driver's largest cost after the wheel's walk through
// an Arm burst. It runs in the driver's pass, on the driver goroutine,
// with sh.mu held.
func (sh *shard) takeValue(id int32, e valueEntry) {
	sh.due(dueItem{f: e.f, when: sh.values.When(id)})
}

// drainValues appends a cancelled *Timeout for each value timeout still
// in the structure to out, for Stop. sh.mu is held.
func (sh *shard) drainValues(out []*Timeout) []*Timeout {
	if sh.values == nil {
		return out
	}
	sh.values.Drain(func(id int32, e valueEntry) {
		// When only reads the entry's deadline, which Drain leaves.
		out = append(out, &Timeout{f: e.f, sh: sh, when: sh.values.When(id), id: unfiled, state: statusCancelled | flagValue})
	})
	return out
}

// Arm schedules f to run d from now and returns its [Handle], as
// [Timer.AfterFunc] does its *[Timeout]: a d of zero or less runs f
// promptly, any d up to math.MaxInt64 is held exactly, and the errors are
// AfterFunc's. It is the single call of [Batch.AfterFunc]: it reads the
// clock and takes a shard lock for this one timeout, whose entry waits
// reserved until the shard's driver next passes (while the driver is
// busy through a burst, it queues the timeout for the driver without the
// lock instead, as AfterFunc does: see [Timer]), and
// allocates nothing (but to grow the structure, a page at a time), so a
// pending timeout costs its shard a 32-byte entry and the caller a
// 12-byte Handle. Cancel it with [Timer.Cancel]. It is O(1) for the
// wheels, O(log n) for the heap and O(n) for the sorted list. Like
// AfterFunc, it may wait up to 10 ms for a driver far behind.
//
// Arm suits a program that cannot group its calls and has no use for
// the rest of a *Timeout (Reset, Deadline, Cancelled): a request
// timeout, made and cancelled once. Arm is safe for concurrent use, but
// must not be called inside a Batch's function, whose lock it may need.
func (t *Timer) Arm(d time.Duration, f func()) (Handle, error) {
	t.mustBeMade("Arm")
	if t.err != nil {
		return Handle{}, t.err
	}
	if f == nil {
		return Handle{}, errNilArmFunc
	}
	sh := &t.shards[0]
	if len(t.shards) > 1 {
		sh = t.pick()
	}
	if !sh.limit.acquire() {
		return Handle{}, ErrTooManyPending
	}
	now := sh.now()
	var when uint64 // 0: due at once (see flagDue)
	if d > 0 {
		when = now + uint64(d)
	}
	if a := sh.arms.Load(); a != nil && sh.passesBy(when) {
		// A burst, whose driver will pass by when: queue without the lock.
		h, err, done := sh.armFree(a, f, when, now)
		if done {
			return h, err
		}
		if a.ring.full() {
			// As AfterFunc: the next shard, or a wait for the driver's
			// next pass (see Timer.spill, driver.awaitRoom).
			if len(t.shards) > 1 {
				sp := t.spill(sh)
				if b := sp.arms.Load(); b != nil && sp.passesBy(when) {
					if h, err, done := sp.armFree(b, f, when, now); done {
						return h, err
					}
				}
			}
			if sh.awaitPass(a.ring.full) {
				if h, err, done := sh.armFree(a, f, when, now); done {
					return h, err
				}
			}
		}
	}
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		sh.limit.release()
		return Handle{}, ErrStopped
	}
	q := sh.values
	if q == nil {
		q = sh.valueQueue()
	}
	if a := sh.arms.Load(); a != nil && a.ring.full() {
		// The driver is far behind: the wait for its pass timed out
		// (awaitPass), or it is asleep past when. File what waits in the
		// ring, once for its 4,096, so that the calls after this one
		// queue without the lock again rather than each take it.
		sh.fileArms(a)
	}
	gen := sh.nextGen()
	id := q.Reserve(when, valueEntry{f: f, gen: gen})
	wake := sh.armed(when)
	late := sh.overslept(now)
	if sh.sleepUntil.Load() == 0 && sh.arms.Load() == nil {
		sh.armedLocked()
	}
	sh.mu.Unlock()
	sh.settle(wake, late)
	return Handle{shard: sh.index, gen: gen, id: id}, nil
}

// The lock-free way in for Arm.
//
// Through a burst, while the shard's driver will pass by the deadline
// (it is awake, or sleeps until no later), Arm queues its timeout in the
// shard's armInbox without the shard's lock, as AfterFunc does in the
// driver's ring (see driver.offer): a ring whose cells also hold an id
// of sh.values, taken by the driver beforehand (queue.Queue.Alloc), and
// its generation, so that the one CompareAndSwap that claims a cell
// also gives Arm the Handle it returns before its entry is filed. The
// driver files each cell into sh.values on its passes (as the driver's
// side inbox, drainSide) and gives it a new id as it does. A Cancel that
// finds no entry for a Handle files what waits in the ring and looks
// again. A full ring sends Arm to the next shard's, then to wait for a
// pass (driver.awaitPass), as AfterFunc. The inbox is made once 256
// Arms in one pass have taken the lock while the driver was awake
// (armedLocked), and dropped after 64 passes with nothing new in it
// (quietArms), when nothing is pending, at Stop, and when Cancels keep
// draining it (drainForCancel).

// armInbox is a shard's lock-free way in for Arm: 128 KiB.
type armInbox struct {
	ring armRing
}

// armRing is ring's bounded queue of many producers and one consumer
// (see ring) for Arm, whose cells also carry the id and generation that
// the next producer of each takes: a producer claims a position with one
// CompareAndSwap of tail, reads the cell's id and generation, writes its
// callback and deadline, and publishes them by setting the cell's seq;
// the consumer, holding sh.mu, files each published cell under its id
// and gives the cell a new one before it advances head past it, so that
// every cell a producer can claim holds an id taken from sh.values and
// not filed. Dropping the ring closes it (armClosed in tail): from then
// on no producer claims a cell, whose id the drop gives back. push is
// O(1) and never waits; the consumer waits only for a producer between
// its claim and its publication.
type armRing struct {
	// tail is the next position to claim, with armClosed once dropped.
	// Written by producers, and by the consumer to close and reopen.
	tail atomic.Uint64
	_    [56]byte
	// head is the next position to take. Written by the consumer only.
	head atomic.Uint64
	_    [56]byte
	cell [ringSize]armCell
}

// armCell holds position seq-1's timeout once seq is set, and the id
// and generation for the position that claims it next: 32 bytes.
type armCell struct {
	seq  atomic.Uint64
	f    func()
	when uint64
	id   int32
	gen  uint32
}

// armClosed marks a dropped armRing's tail: push fails, and full and
// empty no longer apply.
const armClosed = 1 << 63

// push queues f, due at when, and returns the id and generation of its
// entry and its position; ok is false, having queued nothing, if the
// ring is full or closed. It is safe for concurrent use.
func (r *armRing) push(f func(), when uint64) (id int32, gen uint32, pos uint64, ok bool) {
	for {
		t := r.tail.Load()
		if t&armClosed != 0 || t-r.head.Load() >= ringSize {
			return 0, 0, 0, false
		}
		if r.tail.CompareAndSwap(t, t+1) {
			c := &r.cell[t%ringSize]
			id, gen = c.id, c.gen
			c.f, c.when = f, when
			c.seq.Store(t + 1)
			return id, gen, t, true
		}
	}
}

// taken reports whether the consumer has taken the timeout pushed at
// pos.
func (r *armRing) taken(pos uint64) bool { return r.head.Load() > pos }

// full reports whether push would find the ring full (not closed).
func (r *armRing) full() bool {
	t := r.tail.Load()
	return t&armClosed == 0 && t-r.head.Load() >= ringSize
}

// empty reports whether every timeout pushed so far has been taken.
func (r *armRing) empty() bool { return r.head.Load() == r.tail.Load()&^armClosed }

// waiting is how many timeouts wait in the ring.
func (r *armRing) waiting() int { return int(r.tail.Load()&^armClosed - r.head.Load()) }

// passesBy reports whether the driver will pass over the structure
// again by when: it is awake (sleepUntil is 0), or sleeps until no later
// than when. It reads sleepUntil once, without sh.mu.
func (sh *shard) passesBy(when uint64) bool {
	u := sh.sleepUntil.Load()
	return u == 0 || u <= when && u != math.MaxUint64
}

// armedLocked follows an Arm that took the lock while the driver was
// awake and the shard had no armInbox: it counts the Arm, and makes the
// inbox at the 256th of a pass (the count restarts at each, see
// advance): a burst, whose callers then queue without the lock. sh.mu
// is held.
func (sh *shard) armedLocked() {
	if sh.arms.Load() != nil {
		return
	}
	if sh.armsAwake++; sh.armsAwake < batchSize || sh.armsHeld > 0 || !sh.started {
		return
	}
	a := sh.spareArms.Value()
	sh.spareArms = weak.Pointer[armInbox]{}
	if a == nil {
		a = new(armInbox)
	}
	// Every cell gets an id before the ring opens (a new ring's tail is
	// 0, a spare's closed at its head).
	for i := range a.ring.cell {
		c := &a.ring.cell[i]
		c.id, c.gen = sh.values.Alloc(), sh.nextGen()
	}
	a.ring.tail.Store(a.ring.tail.Load() &^ armClosed)
	sh.arms.Store(a)
}

// fileArms files what waits in a's ring into sh.values, giving each cell
// it takes a new id, and moves head on every batchSize cells, so that
// producers find room while it goes on. sh.mu is held.
func (sh *shard) fileArms(a *armInbox) {
	r := &a.ring
	h, t := r.head.Load(), r.tail.Load()&^armClosed
	for n := 0; h < t; {
		c := &r.cell[h%ringSize]
		if c.seq.Load() != h+1 {
			// Claimed, not yet published: the producer is between its
			// CompareAndSwap and its store, unless it was preempted there.
			runtime.Gosched()
			continue
		}
		sh.values.AddAt(c.id, c.when, valueEntry{f: c.f, gen: c.gen})
		c.f = nil
		c.id, c.gen = sh.values.Alloc(), sh.nextGen()
		h++
		if n++; n == batchSize {
			r.head.Store(h)
			n = 0
		}
	}
	r.head.Store(h)
}

// drainSide implements sideInbox: it files what waits in the ring.
// sh.mu is held.
func (sh *shard) drainSide() {
	if a := sh.arms.Load(); a != nil && !a.ring.empty() {
		sh.fileArms(a)
	}
}

// drainForCancel is drainSide for a Cancel whose Handle may name a
// timeout that waits in the ring. Many such Cancels in one pass are
// request timeouts, armed and cancelled before the driver files them,
// for which the ring costs more than the lock (each Cancel drains it
// under the lock): at cancelDrainMax of them in a pass (the count
// restarts at each, see advance), the shard drops its armInbox, and Arm
// takes the lock until a burst makes another. sh.mu is held.
func (sh *shard) drainForCancel() {
	sh.drainSide()
	if sh.cancelDrains++; sh.cancelDrains >= cancelDrainMax {
		sh.dropSide()
		sh.armsHeld = armsHold
	}
}

// cancelDrainMax is drainForCancel's bound: a quarter of a pass's worth
// of Arms (see armedLocked). armsHold is how many passes a shard then
// makes no armInbox, about a second at the default tick while timeouts
// are pending: without it, the same Arms and Cancels made and dropped
// one (128 KiB) many times a second.
const (
	cancelDrainMax = batchSize / 4
	armsHold       = 1024
)

// quietArms drops a, the shard's armInbox, once armsQuietMax passes
// in a row have found nothing new queued in its ring: the burst is over,
// and the inbox's 128 KiB and the ids of its cells go. Called on each
// pass, with sh.mu held.
func (sh *shard) quietArms(a *armInbox) {
	if t := a.ring.tail.Load(); t != sh.armsTail {
		sh.armsTail, sh.armsQuiet = t, 0
		return
	}
	if sh.armsQuiet++; sh.armsQuiet >= armsQuietMax {
		sh.dropSide()
	}
}

// armsQuietMax is quietArms's bound: 64 ticks of the default wheel while
// timeouts are due.
const armsQuietMax = 64

// sideEmpty implements sideInbox.
func (sh *shard) sideEmpty() bool {
	a := sh.arms.Load()
	return a == nil || a.ring.empty()
}

// dropSide implements sideInbox: the armInbox goes, its ring closed,
// what was claimed in it filed, and its cells' ids given back. sh.mu is
// held.
func (sh *shard) dropSide() {
	a := sh.arms.Swap(nil)
	if a == nil {
		return
	}
	sh.armsTail, sh.armsQuiet = 0, 0
	r := &a.ring
	for t := r.tail.Load(); !r.tail.CompareAndSwap(t, t|armClosed); {
		t = r.tail.Load()
	}
	// Every position claimed before the close is filed (fileArms waits
	// for those not yet published), so every cell now holds an id that
	// no producer has: give them all back.
	sh.fileArms(a)
	for i := range r.cell {
		c := &r.cell[i]
		sh.values.Free(c.id)
		c.id, c.gen = unfiled, 0
	}
	// Kept for the next burst until the next garbage collection: bursts
	// a few milliseconds apart would otherwise make 128 KiB each.
	sh.spareArms = weak.Make(a)
}

// armFree is Arm's way without the lock, in a, sh's armInbox: done
// false, having done nothing, if a's ring is full or closed (then the
// caller takes another way); otherwise Arm's results. It queues the
// timeout in a's ring and, if the driver may not see it there (it went
// to sleep, or the inbox was dropped, between the caller's looks, as
// offer tells for the driver's ring), files it under sh.mu. After Stop
// it returns ErrStopped unless Stop took it (then it is among what Stop
// returned). now is the reading when counts from.
func (sh *shard) armFree(a *armInbox, f func(), when, now uint64) (h Handle, err error, done bool) {
	id, gen, pos, ok := a.ring.push(f, when)
	if !ok {
		return Handle{}, nil, false
	}
	h = Handle{shard: sh.index, gen: gen, id: id}
	// As in offer, push and the loads below are sequentially consistent
	// with the driver's store of sleepUntil and its look at the ring
	// (sleepAfter), and with dropSide's close and its drain.
	if sh.arms.Load() == a && sh.passesBy(when) {
		// The driver may be asleep: if it overslept, wake it and yield,
		// as a call under the lock does (see driver.settle).
		sh.settle(false, sh.oversleptFree(now))
		return h, nil, true
	}
	sh.mu.Lock()
	if sh.stopped {
		taken := a.ring.taken(pos)
		sh.mu.Unlock()
		if taken {
			return h, nil, true
		}
		sh.limit.release()
		return Handle{}, ErrStopped, true
	}
	sh.fileArms(a) // if a was dropped, its drop filed it: nothing waits
	wake := sh.armed(when)
	late := sh.overslept(now)
	sh.mu.Unlock()
	sh.settle(wake, late)
	return h, nil, true
}

var errNilArmFunc = errors.New("hourglass: Arm: nil func")

// Cancel cancels the timeout h names and reports whether this call kept
// it from running: false if it has run, is being handed to the executor,
// was cancelled, was returned by Stop, or if h is the zero Handle. It is
// O(1) for the wheels and the list and O(log n) for the heap, and takes
// the lock of h's shard once; to cancel many, use [Batch.Cancel]. Cancel
// is safe for concurrent use, but must not be called inside a Batch's
// function, whose lock it may need.
func (t *Timer) Cancel(h Handle) bool {
	t.mustBeMade("Cancel")
	if int(h.shard) >= len(t.shards) {
		return false
	}
	// sh.cancelValue(h) written out, the limit released after the lock:
	// with Arm's test of sh.values before it calls valueQueue, that saves
	// calls on every Arm+Cancel pair (BenchmarkTimer_ArmCancel_Pending
	// under callgrind).
	sh := &t.shards[h.shard]
	sh.mu.Lock()
	ok := sh.values != nil && sh.values.RemoveIf(h.id, h.names)
	if !ok && !sh.sideEmpty() {
		// It may wait in the ring, not yet filed.
		sh.drainForCancel()
		ok = sh.values.RemoveIf(h.id, h.names)
	}
	sh.mu.Unlock()
	if ok {
		sh.limit.release()
	}
	return ok
}
