package hourglass

import (
	"errors"
	"math"
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
// Value timeouts skip the inbox: Arm files its timeout at once, and a
// Batch, which already pays one lock for many, reserves each entry and
// files those still pending when it releases the lock (queue's Reserve
// and FileReserved), so one it cancels meanwhile never reaches the
// structure. Cancel then needs no status to check, only the generation.
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
// clock and takes a shard lock for this one timeout (while the shard's
// driver is busy through a burst, it queues the timeout for the driver
// without the lock instead, as AfterFunc does: see [Timer]), and
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
	gen := sh.nextGen()
	id := q.Add(when, valueEntry{f: f, gen: gen})
	wake := sh.armed(when)
	late := sh.overslept(now)
	if sh.sleepUntil.Load() == 0 || sh.arms.Load() != nil {
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
// driver's ring (see driver.offer): a ring of
// armItem, which the driver files into sh.values on each pass (as the
// driver's side inbox, drainSide), and a pool of ids the driver takes
// from sh.values beforehand (queue.Queue.Alloc), each with its
// generation, so that Arm can return the Handle before its entry is
// filed. A Cancel that finds no entry for a Handle files what waits in
// the ring and looks again. A full ring sends Arm to the next shard's,
// then to wait for a pass (driver.awaitPass), as AfterFunc. The inbox
// is made once 256 Arms in one pass have taken the lock while the
// driver was awake (armedLocked), and dropped after 64 passes with
// nothing new in it (quietArms), when nothing is pending, at Stop, and
// when Cancels keep draining it (drainForCancel).

// armItem is a timeout Arm queued in the ring, with its entry's id and
// generation from the pool.
type armItem struct {
	f    func()
	when uint64
	id   int32
	gen  uint32
}

// armInbox is a shard's lock-free way in for Arm: 160 KiB.
type armInbox struct {
	ring ring[armItem]
	ids  idPool
}

// idPool holds ids of sh.values taken by the driver (queue's Alloc),
// each with a generation, for Arm to take without the lock: filled by
// holders of sh.mu, taken from by any caller. cur is the next index to take
// and an epoch, which each refill moves on, so that a taker that read
// an index before a refill cannot take it after. take is O(1) and never
// waits; refill and drop hold sh.mu.
type idPool struct {
	cur atomic.Uint64           // epoch<<32 | next index; ringSize: none to take
	ids [ringSize]atomic.Uint64 // gen<<32 | id
}

// take returns an id and its generation, or ok false if none is left.
func (p *idPool) take() (id int32, gen uint32, ok bool) {
	for {
		v := p.cur.Load()
		i := uint32(v)
		if i >= ringSize {
			return 0, 0, false
		}
		e := p.ids[i].Load()
		if p.cur.CompareAndSwap(v, v+1) {
			return int32(uint32(e)), uint32(e >> 32), true
		}
	}
}

// stopTaking makes take fail until the next refill and returns the index
// takers had reached: the ids from it on were not taken.
func (p *idPool) stopTaking() uint32 {
	v := p.cur.Load()
	for !p.cur.CompareAndSwap(v, v&^(1<<32-1)|ringSize) {
		v = p.cur.Load()
	}
	return min(uint32(v), ringSize)
}

// passesBy reports whether the driver will pass over the structure
// again by when: it is awake (sleepUntil is 0), or sleeps until no later
// than when. It reads sleepUntil once, without sh.mu.
func (sh *shard) passesBy(when uint64) bool {
	u := sh.sleepUntil.Load()
	return u == 0 || u <= when && u != math.MaxUint64
}

// armedLocked follows an Arm that took the lock while the driver was
// awake or the shard had its armInbox. With the inbox, the callers
// outpace the driver's passes (its pool was empty): it refills the pool.
// Without, it counts the Arm, and makes the inbox at the 256th of a
// pass (the count restarts at each, see advance): a burst, whose
// callers then queue without the lock. sh.mu is held.
func (sh *shard) armedLocked() {
	if a := sh.arms.Load(); a != nil {
		sh.refillIDs(a)
		return
	}
	if sh.armsAwake++; sh.armsAwake < batchSize || sh.armsHeld > 0 || !sh.started {
		return
	}
	a := sh.spareArms.Value()
	sh.spareArms = weak.Pointer[armInbox]{}
	if a == nil {
		a = new(armInbox)
		a.ids.cur.Store(ringSize)
	}
	sh.refillIDs(a)
	sh.arms.Store(a)
}

// refillIDs gives a's pool a new id with its generation for each one
// taken, once half of them are. sh.mu is held.
func (sh *shard) refillIDs(a *armInbox) {
	if uint32(a.ids.cur.Load()) < ringSize/2 {
		return
	}
	epoch := a.ids.cur.Load() >> 32
	n := a.ids.stopTaking()
	for i := range n {
		id := sh.values.Alloc()
		a.ids.ids[i].Store(uint64(sh.nextGen())<<32 | uint64(uint32(id)))
	}
	a.ids.cur.Store((epoch + 1) << 32)
}

// fileArms files what waits in a's ring into sh.values. sh.mu is held.
func (sh *shard) fileArms(a *armInbox) {
	if sh.armScratch == nil {
		sh.armScratch = make([]armItem, 0, batchSize)
	}
	sh.armScratch = a.ring.drain(sh.armScratch, sh.fileArm)
}

// fileArmItems files armItems into sh.values: fileArms's take (see
// shard.fileArm).
func (sh *shard) fileArmItems(in []armItem) {
	for _, it := range in {
		sh.values.AddAt(it.id, it.when, valueEntry{f: it.f, gen: it.gen})
	}
}

// drainSide implements sideInbox: it files what waits in the ring and
// refills the pool. sh.mu is held.
func (sh *shard) drainSide() {
	a := sh.arms.Load()
	if a == nil {
		return
	}
	if !a.ring.empty() {
		sh.fileArms(a)
	}
	sh.refillIDs(a)
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
// one (160 KiB) many times a second.
const (
	cancelDrainMax = batchSize / 4
	armsHold       = 1024
)

// quietArms drops a, the shard's armInbox, once armsQuietMax passes
// in a row have found nothing new queued in its ring: the burst is over,
// and the inbox's 160 KiB and the ids of its pool go. Called on each
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

// dropSide implements sideInbox: the armInbox goes, its ring filed and
// its pool's ids not taken given back. sh.mu is held.
func (sh *shard) dropSide() {
	a := sh.arms.Swap(nil)
	if a == nil {
		return
	}
	sh.armsTail, sh.armsQuiet = 0, 0
	sh.fileArms(a)
	for i := a.ids.stopTaking(); i < ringSize; i++ {
		sh.values.Free(int32(uint32(a.ids.ids[i].Load())))
	}
	sh.armScratch = nil
	// Kept for the next burst until the next garbage collection: bursts
	// a few milliseconds apart would otherwise make 160 KiB each.
	sh.spareArms = weak.Make(a)
}

// armFree is Arm's way without the lock, in a, sh's armInbox: done
// false, having done nothing, if a's ring is full or its pool empty
// (then the caller takes another way); otherwise Arm's results.
func (sh *shard) armFree(a *armInbox, f func(), when, now uint64) (h Handle, err error, done bool) {
	if a.ring.full() {
		return Handle{}, nil, false
	}
	id, gen, ok := a.ids.take()
	if !ok {
		return Handle{}, nil, false
	}
	h, err = sh.armQueued(a, armItem{f: f, when: when, id: id, gen: gen}, now)
	return h, err, true
}

// armQueued ends an Arm whose id it came from a's pool: it queues it in
// a's ring and, if the driver may not see it there (it went to sleep,
// or the inbox was dropped, between the caller's looks, as offer tells
// for the driver's ring), files it under sh.mu; or, if the ring is full,
// files what waits there and it under sh.mu. After Stop it returns
// ErrStopped unless Stop took it (then it is among what Stop returned).
// now is the reading it.when counts from.
func (sh *shard) armQueued(a *armInbox, it armItem, now uint64) (Handle, error) {
	h := Handle{shard: sh.index, gen: it.gen, id: it.id}
	pos, ok := a.ring.push(it)
	// As in offer, push and the loads below are sequentially consistent
	// with the driver's store of sleepUntil and its look at the ring
	// (sleepAfter), and with dropSide's swap and its drain.
	if ok && sh.arms.Load() == a && sh.passesBy(it.when) {
		// The driver may be asleep: if it overslept, wake it and yield,
		// as a call under the lock does (see driver.settle).
		sh.settle(false, sh.oversleptFree(now))
		return h, nil
	}
	sh.mu.Lock()
	if sh.stopped {
		taken := ok && a.ring.taken(pos)
		sh.mu.Unlock()
		if taken {
			return h, nil
		}
		sh.limit.release()
		return Handle{}, ErrStopped
	}
	if ok {
		sh.fileArms(a) // a may be gone: then no one else drains it
	} else {
		sh.flush() // the driver is far behind: file what waits for it
		sh.values.AddAt(it.id, it.when, valueEntry{f: it.f, gen: it.gen})
	}
	wake := sh.armed(it.when)
	late := sh.overslept(now)
	sh.mu.Unlock()
	sh.settle(wake, late)
	return h, nil
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
