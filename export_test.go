package hourglass

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// Internal hooks for the tests in package hourglass_test.

// DriverWakeups reports how many passes t's driver goroutines have made
// over their structures, summed over the shards (see [Stats.Wakeups]).
func DriverWakeups(t *Timer) uint64 { return t.Stats().Wakeups }

// StartedDrivers reports how many of t's shards have started their driver
// goroutine.
func StartedDrivers(t *Timer) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if sh.started {
			n++
		}
		sh.mu.Unlock()
	}
	return n
}

// AfterFuncOnShard schedules f to run d from now on shard i, where
// [Timer.AfterFunc] would use the shard of the caller's P, so that tests
// can spread timeouts over several shards whatever P they run on.
func AfterFuncOnShard(t *Timer, i int, d time.Duration, f func()) (*Timeout, error) {
	now := t.now()
	return t.scheduleOn(&t.shards[i], now, after(now, d), f, nil)
}

// TimeOfReading returns the instant of reading r of t's clock: r
// nanoseconds after New.
func TimeOfReading(t *Timer, r uint64) time.Time { return t.timeOf(r) }

// BatchOnShard runs fn with a Batch that holds shard i, where
// [Timer.Batch] would schedule on the shard of the caller's P, so that
// tests can spread value timeouts over several shards.
func BatchOnShard(t *Timer, i int, fn func(b *Batch)) {
	t.Batch(func(b *Batch) {
		b.lock(&t.shards[i])
		fn(b)
	})
}

// HandleShard reports the shard h's timeout is on.
func HandleShard(h Handle) int { return int(h.shard) }

// Waiting reports how many callbacks t has started on goroutines of their
// own that have not begun yet (see driver.settle).
func Waiting(t *Timer) int64 { return t.waiting.Load() }

// KeyedWaiting is Waiting for a Keyed.
func KeyedWaiting[K comparable](k *Keyed[K]) int64 { return k.runner.waiting.Load() }

// WaitingMax is the number of callbacks waiting to start above which a
// scheduling call yields (see driver.settle).
const WaitingMax = waitingMax

// Settle runs what ends a scheduling call, driver.settle, with waiting
// as the count of callbacks waiting to start and no goroutine to wake.
func Settle(waiting *atomic.Int64) {
	var d driver[int, int]
	d.init(nil, newClock(), runner{waiting: waiting}, newExits())
	d.settle(false, false)
}

// Overslept reports what driver.overslept says of a goroutine asleep
// until the reading sleepUntil, asked at the reading now, and the reading
// it sleeps until afterwards.
func Overslept(sleepUntil, now uint64) (late bool, after uint64) {
	var d driver[int, int]
	d.sleepUntil.Store(sleepUntil)
	late = d.overslept(now)
	return late, d.sleepUntil.Load()
}

// The inbox's sizes (see driver.put and driver.offer).
const (
	BatchSize = batchSize
	FullMax   = fullMax
	RingSize  = ringSize
	RoomWait  = roomWait
)

// Inbox reports, for shard i of t, how many timeouts its structure holds
// (filed), how many wait in its inbox (waiting), and how many wait for
// its driver goroutine in inboxes handed to it or in its ring (handed).
func Inbox(t *Timer, i int) (filed, waiting, handed int) {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, in := range sh.full {
		handed += len(in)
	}
	if r := sh.ring.Load(); r != nil {
		handed += int(r.tail.Load() - r.head.Load())
	}
	return sh.q.Len(), len(sh.inbox), handed
}

// LockShard takes the lock of t's shard i and returns what releases it,
// so that a test can check that a call does not need it.
func LockShard(t *Timer, i int) (unlock func()) {
	sh := &t.shards[i]
	sh.mu.Lock()
	return sh.mu.Unlock
}

// Ring reports whether t's shard i has a ring (see driver.offer).
func Ring(t *Timer, i int) bool {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.ring.Load() != nil
}

// AfterPass has f called once, on t's shard i driver goroutine with the
// shard's lock held, after its next pass and before it records how long
// it sleeps.
func AfterPass(t *Timer, i int, f func()) {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.afterPass = func() {
		sh.afterPass = nil
		f()
	}
}

// Arms reports whether t's shard i has its armInbox, Arm's way in
// without the lock (see handle.go), and how many Arms wait in its ring.
func Arms(t *Timer, i int) (made bool, waiting int) {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a := sh.arms.Load()
	if a == nil {
		return false, 0
	}
	return true, a.ring.waiting()
}

// ArmsReserved reports how many value timeouts of t's shard i are
// reserved in its value structure and wait to be filed (see Arm).
func ArmsReserved(t *Timer, i int) int {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.values == nil {
		return 0
	}
	return sh.values.Reserved()
}

// Oversleep makes t's shard i driver, asleep, look as if it should have
// woken at reading r of t's clock (see driver.overslept), so that a test
// can check what a scheduling call does about a driver that overslept.
func Oversleep(t *Timer, i int, r uint64) {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.sleepUntil.Store(r)
}

// Now reads t's clock.
func Now(t *Timer) uint64 { return t.now() }

// ArmsInbox returns t's shard i armInbox, as an any to compare, or nil.
func ArmsInbox(t *Timer, i int) any {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if a := sh.arms.Load(); a != nil {
		return a
	}
	return nil
}

// DropArms drops t's shard i armInbox, as a pass that finds it quiet
// does, and returns a function that pushes into the dropped inbox's
// ring as an Arm that loaded it just before the drop would: it reports
// whether the push was taken, and the id it was given.
func DropArms(t *Timer, i int) (push func() (id int32, ok bool)) {
	sh := &t.shards[i]
	sh.mu.Lock()
	a := sh.arms.Load()
	sh.dropSide()
	sh.mu.Unlock()
	return func() (int32, bool) {
		id, _, _, ok := a.ring.push(func() {}, 0)
		return id, ok
	}
}

// batchOf reports the capacity of d's batch and the address of its
// array (0 for none), so that a test can tell whether a pass kept the
// array of the pass before. d.mu is held.
func batchOf(d *driver[*Timeout, dueItem]) (int, uintptr) {
	if cap(d.batch) == 0 {
		return 0, 0
	}
	return cap(d.batch), uintptr(unsafe.Pointer(unsafe.SliceData(d.batch)))
}

// BatchAfterPass is AfterPass for t's shard i, reporting its batch
// (see batchOf) after the pass.
func BatchAfterPass(t *Timer, i int, f func(capacity int, array uintptr)) {
	sh := &t.shards[i]
	AfterPass(t, i, func() { f(batchOf(&sh.driver)) })
}

// BatchNow reports t's shard i batch (see batchOf).
func BatchNow(t *Timer, i int) (int, uintptr) {
	sh := &t.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return batchOf(&sh.driver)
}
