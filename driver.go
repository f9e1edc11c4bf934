package hourglass

// This file is the layer between the structures and Timer/Keyed: the
// driver loop, then the clock it reads, then how it hands what is due to
// the executor (runner, handOff). docs/DESIGN.md draws the layers.

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// driver is the loop behind a Timer shard and a Keyed: the lock, the
// clock, the goroutine that advances a structure to now and hands what is
// due to the executor, and the two batches around it. It knows nothing
// of timeouts or keys: its worker (a shard, a Keyed) files what waits in
// the inbox into its structure, advances the structure, and delivers one
// due item; the driver does the rest.
//
// The goroutine is started by the first deadline, so an unused Timer has
// none, and with nothing pending it waits on channels only: no wake-ups
// at all. Each pass, under mu, files the inbox, advances the structure
// to now, which appends what is due to the outbox (the batch), and works
// out how long to sleep; then, without mu, the goroutine hands the batch
// over one item at a time and sleeps until the next deadline or until an
// earlier one wakes it.
//
// In is what callers queue for the structure (a *Timeout, a key and its
// deadline) and Out what the structure hands back when due (a *Timeout,
// a key).
type driver[In, Out any] struct {
	mu sync.Mutex
	// stopped is set once by halt. Guarded by mu.
	stopped bool
	// started is set when the goroutine is started. Guarded by mu.
	started bool
	// sleepUntil is the clock reading the goroutine sleeps until: 0 while
	// it is awake and will look at the structure again before sleeping,
	// MaxUint64 while it waits with nothing to do. A deadline before it
	// must wake the goroutine. Written under mu, except by the goroutine
	// as it wakes (to 0); read without mu by offer.
	sleepUntil atomic.Uint64
	// wakeups counts passes over the structure. Guarded by mu.
	wakeups uint64

	// inbox holds what callers queued since the structure was last
	// brought up to date, in order: see batchSize. full holds the
	// inboxes that filled up while the goroutine was awake, oldest first,
	// for it to file (see put), and spare emptied ones for reuse. Guarded
	// by mu.
	inbox []In
	full  [][]In
	spare [][]In
	// ring is the inbox's lock-free part, for a driver made with rings
	// set (a Timer shard's): while the goroutine is awake, callers queue
	// there without mu (offer), and each pass takes what they queued
	// (flush). It is made when a full inbox first goes to the awake
	// goroutine (put), and dropped when nothing is pending and at halt.
	// Written under mu; read without it by offer. scratch is flush's
	// buffer for what it takes from the ring. Guarded by mu.
	ring    atomic.Pointer[ring[In]]
	rings   bool
	scratch []In
	// room tells a caller waiting for room in the full ring (awaitRoom)
	// that a pass has taken from it, when roomWanted is set.
	room       chan struct{} // buffered 1
	roomWanted atomic.Bool
	// roomLate is set when a wait for room timed out, and cleared by the
	// next pass: until then callers do not wait (see awaitRoom).
	roomLate atomic.Bool
	// side is the worker's second lock-free inbox, if it has one (a Timer
	// shard's, for Arm: see armInbox): the driver drains it with its own
	// (flush), stays awake while it holds anything (sleepAfter), and
	// drops it when nothing is pending and at halt. Set by init's caller;
	// nil for a Keyed.
	side sideInbox
	// afterPass is a test's hook (see export_test.go), called after a
	// pass. Guarded by mu; nil outside tests.
	afterPass func()
	// batch holds what the last pass found due, written under mu by the
	// pass. The goroutine hands it over without mu, claiming each item
	// first (next); halt, under mu, takes those not yet claimed. Each
	// item is cleared as it is claimed or taken, so a batch keeps nothing
	// alive once handed over.
	batch []Out
	// next is how far the goroutine has got in handing its batch over:
	// items below next are claimed, handed over or being handed, and the
	// rest wait. The goroutine claims them one at a time with an atomic
	// add, without mu; halt, holding mu, claims all the rest with one
	// swap. So each item is either handed over or taken by halt, never
	// both, and neither waits for the other: Stop needs no way to tell
	// whether it runs on the goroutine, in a callback.
	next atomic.Int64

	clock
	runner
	wake  chan struct{} // buffered 1: a new earliest deadline
	quit  chan struct{} // closed by halt
	exits *exits        // told when the goroutine starts and exits

	w worker[In, Out]
}

// worker is what a driver drives.
type worker[In, Out any] interface {
	// file puts the items of the inbox into the structure. d.mu is held.
	file(in []In)
	// advance advances the structure to now, handing each due item to
	// the driver's due. It reports the next time worth waking for (ok is
	// false when nothing is pending). d.mu is held.
	advance(now uint64) (next uint64, ok bool)
	// deliver hands one due item, claimed, to the executor. d.mu is not
	// held; it runs on the driver goroutine.
	deliver(out Out)
	// handedOver ends a batch's deliveries: what deliver gathered is
	// handed over (see handOff). As deliver.
	handedOver()
}

// sideInbox is a driver's second lock-free inbox (see driver.side). Its
// methods are called with d.mu held.
type sideInbox interface {
	// drainSide files what callers have queued in it.
	drainSide()
	// sideEmpty reports whether nothing waits in it.
	sideEmpty() bool
	// dropSide files what waits in it and drops it: callers that then
	// find it gone queue under d.mu, and one that queued meanwhile files
	// its item itself.
	dropSide()
}

// batchSize is how many items wait in the inbox before they are filed
// together. As Netty's HashedWheelTimer does with its queue of new
// timeouts, a driver files new deadlines into its structure only later,
// in a batch: when the batch is full (by the caller, or by the
// goroutine if it is awake: see put), when the goroutine wakes, or when
// anything needs the structure whole (Stop, Stats, a Keyed's reads). A
// timeout cancelled before then (a request that completed in time, the
// common case) never touches the structure: its Cancel is a status
// change. Filing a batch in one loop also overlaps the cache misses that
// filing one at a time pays in full, which shows in moving a Keyed's key
// among 10^6 (BenchmarkKeyed_Set_Existing). 256 pointers are 2 KiB, 256
// Sets of an 8-byte key 4 KiB.
const batchSize = 256

func (d *driver[In, Out]) init(w worker[In, Out], c clock, r runner, e *exits) {
	d.w = w
	d.clock = c
	d.runner = r
	d.wake = make(chan struct{}, 1)
	d.room = make(chan struct{}, 1)
	d.quit = make(chan struct{})
	d.exits = e
}

// put queues in for the structure. A full inbox is filed at once, on
// the caller's goroutine, unless the driver goroutine is awake and will
// pass over the structure before it sleeps (sleepUntil is 0: it is
// handing a batch over, or has been woken): then the inbox joins full,
// for that pass to file, and the caller goes on with an empty one. So
// while timeouts fire, as in a burst, filing moves off the goroutines
// that schedule, as Netty's worker files what its callers queue. At
// most fullMax inboxes wait so: the caller whose inbox fills beyond them
// files them all, oldest first, as filing must keep the order of the
// calls (a Keyed's later Set of a key wins). The first inbox handed so
// makes a Timer shard's ring, through which callers then queue without
// d.mu while the goroutine is awake (see offer). It is O(1), but for the
// call that files, O(what waits). d.mu is held.
func (d *driver[In, Out]) put(in In) {
	if d.inbox = append(d.inbox, in); len(d.inbox) < batchSize {
		return
	}
	if d.sleepUntil.Load() != 0 || !d.started || len(d.full) == fullMax {
		d.flush()
		return
	}
	if d.rings && d.ring.Load() == nil {
		// A burst: from now on callers queue without mu while the
		// goroutine is awake.
		d.ring.Store(new(ring[In]))
	}
	d.full = append(d.full, d.inbox)
	if n := len(d.spare); n > 0 {
		d.inbox = d.spare[n-1]
		d.spare[n-1] = nil
		d.spare = d.spare[:n-1]
	} else {
		d.inbox = make([]In, 0, batchSize)
	}
}

// fullMax bounds the inboxes that wait for the goroutine to file them
// (see put): 16 of 256, so a pass files at most 4,352 items, and the
// memory of callers that outpace a goroutine kept from its passes (a
// slow callback on it) stays bounded. spareMax bounds the empty inboxes
// a driver keeps while anything is pending: 8 KiB for a Timer's.
const (
	fullMax  = 16
	spareMax = 4
)

// flush files the inboxes, the ring first, then the others oldest
// first, in O(what waits). Everything that reads the structure flushes
// first, so nothing can observe the wait. d.mu is held.
func (d *driver[In, Out]) flush() {
	if r := d.ring.Load(); r != nil {
		d.drain(r)
	}
	if d.side != nil {
		d.side.drainSide()
	}
	for i, in := range d.full {
		d.w.file(in)
		clear(in) // let what it held go
		if len(d.spare) < spareMax {
			d.spare = append(d.spare, in[:0])
		}
		d.full[i] = nil
	}
	d.full = d.full[:0]
	if len(d.inbox) == 0 {
		return
	}
	d.w.file(d.inbox)
	clear(d.inbox)
	d.inbox = d.inbox[:0]
}

// drain files what callers have queued in r, waiting for any of them
// between claiming a place and writing to it. d.mu is held.
func (d *driver[In, Out]) drain(r *ring[In]) {
	if d.scratch == nil {
		d.scratch = make([]In, 0, batchSize)
	}
	d.scratch = r.drain(d.scratch, d.w.file)
}

// awaitRoom waits, without d.mu, for the goroutine to take from its
// full ring, at most roomWait, and reports whether it did (or may have:
// the caller tries the ring again). A caller whose timeout found the
// ring full, the goroutine far behind, waits so instead of filing what
// the ring holds on its behalf: firing comes before scheduling, and a
// caller that waits leaves the processor to the drivers, as one that
// files does not. The bound is for a caller that no pass can answer: a
// callback running on the goroutine itself, which waits roomWait and
// then files; and since a wait that timed out makes callers file until
// the next pass, such a callback waits once however many it schedules.
func (d *driver[In, Out]) awaitRoom() bool {
	r := d.ring.Load()
	if r == nil {
		return false
	}
	return d.awaitPass(r.full)
}

// awaitPass is awaitRoom for any ring the pass takes from, full telling
// whether it still is (a Timer shard's armInbox's, for Arm).
func (d *driver[In, Out]) awaitPass(full func() bool) bool {
	if d.roomLate.Load() {
		return false
	}
	d.roomWanted.Store(true)
	if !full() {
		return true // taken from meanwhile
	}
	t := time.NewTimer(roomWait)
	defer t.Stop()
	select {
	case <-d.room:
		return true
	case <-t.C:
		d.roomLate.Store(true)
		return false
	}
}

// roomWait bounds awaitRoom: ten ticks of the default wheel, time for a
// driver behind on a loaded machine to pass. (At one tick, callers on a
// loaded machine time out and file about as often as without the wait.)
const roomWait = 10 * time.Millisecond

// offer queues in for the structure in the ring, without d.mu, if the
// goroutine is awake and will pass over the structure again (sleepUntil
// is 0), as it is through a burst, so that callers and the goroutine do
// not take turns at d.mu. It reports ok false, having queued nothing,
// when the caller must queue in under d.mu instead (put): with no ring,
// the goroutine asleep, or the ring full (then full is true, and the
// caller files everything, as put does beyond fullMax). With ok true,
// settled false means that the ring was dropped (by halt, or as nothing
// was pending) or the goroutine went to sleep between offer's two looks,
// so that it may not have seen in: the caller must then call settleRing
// with r. O(1), and it never waits.
func (d *driver[In, Out]) offer(in In) (r *ring[In], ok, settled, full bool) {
	r = d.ring.Load()
	if r == nil || d.sleepUntil.Load() != 0 {
		return nil, false, false, false
	}
	if _, ok := r.push(in); !ok {
		return nil, false, false, true
	}
	// push and the loads below are sequentially consistent, as are the
	// goroutine's store of sleepUntil (or of ring) and its look at the
	// ring after it (see sleepAfter): either the goroutine sees in, or
	// the caller sees that it may not have.
	return r, true, d.ring.Load() == r && d.sleepUntil.Load() == 0, false
}

// due appends out to the batch. The worker's advance calls it. d.mu is
// held.
func (d *driver[In, Out]) due(out Out) { d.batch = append(d.batch, out) }

// armed is called after a deadline at when is queued, with d.mu held. It
// starts the goroutine on the first deadline and reports whether the
// goroutine sleeps past when and must be woken with wakeUp after d.mu is
// released.
func (d *driver[In, Out]) armed(when uint64) (wake bool) {
	if !d.started {
		d.started = true
		d.exits.started()
		go d.run()
		return false
	}
	if when < d.sleepUntil.Load() {
		d.sleepUntil.Store(0) // one wake-up is enough until the driver looks again
		return true
	}
	return false
}

// overslept reports whether the goroutine, asleep, should have woken more
// than oversleepMax before now, a reading taken by a caller scheduling a
// deadline: see settle. It then counts the goroutine as awake, so that one
// caller, not every one, wakes it. d.mu is held.
func (d *driver[In, Out]) overslept(now uint64) bool {
	u := d.sleepUntil.Load()
	if u == 0 || u == math.MaxUint64 || now <= u+oversleepMax {
		return false
	}
	d.sleepUntil.Store(0)
	return true
}

// oversleptFree is overslept for a caller that does not hold d.mu (Arm
// through its ring): one CompareAndSwap counts the goroutine as awake,
// so that one caller, not every one, wakes it.
func (d *driver[In, Out]) oversleptFree(now uint64) bool {
	u := d.sleepUntil.Load()
	if u == 0 || u == math.MaxUint64 || now <= u+oversleepMax {
		return false
	}
	return d.sleepUntil.CompareAndSwap(u, 0)
}

// settle ends a call that queued deadlines, once d.mu is released: it
// wakes the goroutine if armed said so (wake) or if it has overslept
// (late), and then gives up the caller's P while the timer is behind.
//
// Firing comes before scheduling, as with the runtime's own timers, which
// each P runs before its goroutines. A goroutine that schedules without
// pause (a loop making a million timeouts) keeps its P until the runtime
// preempts it, up to 10 ms later, and two things wait meanwhile: the
// runtime timer the driver sleeps on, when it sits on that P, so that the
// driver oversleeps; and, with Goroutines, the callbacks already started,
// in the run queues. While the scheduling outpaces the firing, the
// lateness grows with the burst, past time.AfterFunc's (the burst
// scenario of hourglass-bench measures both; see docs/BENCHMARKS.md). So
// the caller yields its P once (runtime.Gosched)
// when the driver has overslept, and again, up to yieldMax times, while
// more than waitingMax of the Timer's callbacks wait to start. A caller
// finding the timer on time pays one atomic load.
func (d *driver[In, Out]) settle(wake, late bool) {
	if wake || late || d.waiting.Load() > waitingMax {
		d.catchUp(wake, late)
	}
}

// catchUp is settle's way when the driver must be woken or the timer is
// behind: settle's test alone inlines into every scheduling call.
func (d *driver[In, Out]) catchUp(wake, late bool) {
	if wake || late {
		d.wakeUp()
	}
	if late {
		runtime.Gosched()
	}
	for i := 0; i < yieldMax && d.waiting.Load() > waitingMax; i++ {
		runtime.Gosched()
	}
}

// The limits of settle. oversleepMax is the default tick: a driver woken
// a tick late is behind. waitingMax is a P's local run queue (256
// goroutines in the runtime): beyond it, goroutines spill into the global
// queue, where the oldest wait behind newer ones (see handOff). yieldMax
// bounds the wait for callbacks that cannot start, every P being busy
// with other work: each yield lets the run queues move.
const (
	oversleepMax = uint64(time.Millisecond)
	waitingMax   = 256
	yieldMax     = 64
)

// wakeUp tells a sleeping goroutine that a deadline is earlier than it
// planned. It never blocks.
func (d *driver[In, Out]) wakeUp() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// pass files the inbox, advances the structure to now into a new batch,
// and returns the reading to sleep until: 0 to look again at once,
// MaxUint64 for nothing pending. d.mu is held.
func (d *driver[In, Out]) pass(now uint64) uint64 {
	// A batch beyond batchKeepMax is kept while the passes fill a
	// quarter of it, as through a burst, so that each pass does not grow
	// a new one from nothing; a pass that uses less, or finds nothing
	// due (below), lets it go.
	if c := cap(d.batch); c > batchKeepMax && len(d.batch) < c/4 {
		d.batch = nil
	} else {
		d.batch = d.batch[:0]
	}
	// The goroutine holds mu, so neither a claim nor halt can run.
	d.next.Store(0)
	d.flush()
	// The ring is empty: answer a caller waiting for room (awaitRoom).
	if d.roomLate.Load() {
		d.roomLate.Store(false)
	}
	if d.roomWanted.Load() {
		d.roomWanted.Store(false)
		select {
		case d.room <- struct{}{}:
		default:
		}
	}
	next, ok := d.w.advance(now)
	if len(d.batch) == 0 && cap(d.batch) > batchKeepMax {
		d.batch = nil // the burst is over: keep no burst's worth of memory
	}
	switch {
	case len(d.batch) > 0 || (ok && next <= now):
		return 0
	case ok:
		return next
	}
	d.spare = nil // nothing pending: keep no inboxes for a burst to come
	return math.MaxUint64
}

// batchKeepMax bounds the batch that a pass keeps for the next, in
// items, once the passes stop filling it (see pass): 768 KiB of a Timer
// shard's (dueItem, 24 bytes).
const batchKeepMax = 1 << 15

// sleepAfter records until, what pass returned, as the reading the
// goroutine sleeps until, and returns it; or returns 0, to pass again,
// if callers have queued in the ring (or the side inbox) since the pass
// took from it. A ring left empty when nothing is pending is dropped,
// the side inbox too: the next burst makes another. d.mu is held.
func (d *driver[In, Out]) sleepAfter(until uint64) uint64 {
	d.sleepUntil.Store(until)
	if until == 0 {
		return 0
	}
	r := d.ring.Load()
	if r != nil && !r.empty() || d.side != nil && !d.side.sideEmpty() {
		d.sleepUntil.Store(0)
		return 0
	}
	if until == math.MaxUint64 {
		if r != nil {
			d.ring.Store(nil)
		}
		if d.side != nil {
			d.side.dropSide()
		}
	}
	return until
}

// handOver delivers the batch, one item at a time, each claimed first,
// as halt may take the rest meanwhile. It runs on the goroutine, without
// d.mu.
func (d *driver[In, Out]) handOver() {
	var zero Out
	n := int64(len(d.batch))
	for {
		i := d.next.Add(1) - 1
		if i >= n {
			d.w.handedOver()
			return
		}
		out := d.batch[i]
		d.batch[i] = zero
		d.w.deliver(out)
	}
}

// run is the driver goroutine. It exits when halt closes quit.
func (d *driver[In, Out]) run() {
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
		d.handOver()
		d.mu.Lock()
		if d.stopped {
			d.mu.Unlock()
			break
		}
		d.wakeups++
		now := d.now()
		next := d.pass(now)
		if d.afterPass != nil {
			d.afterPass()
		}
		until := d.sleepAfter(next)
		d.mu.Unlock()

		switch until {
		case 0:
			continue
		case math.MaxUint64:
			select {
			case <-d.wake:
			case <-d.quit:
			}
			d.sleepUntil.Store(0) // awake: offer may queue in the ring
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
		d.sleepUntil.Store(0)
	}
	if sleep != nil {
		sleep.Stop()
	}
	clean = true
}

// halt stops d: it hands each item of the batch not yet claimed to
// taken, files the inbox so that the caller can drain the structure
// whole, marks d stopped and tells the goroutine to exit. It may run on
// any goroutine, the driver's own included (a callback calling Stop), and
// waits for none. It reports false if d was already stopped. d.mu must be
// held.
func (d *driver[In, Out]) halt(taken func(Out)) bool {
	if d.stopped {
		return false
	}
	// No caller queues in the ring from here on, or one that does sees
	// that it was dropped (see offer).
	r := d.ring.Swap(nil)
	select {
	case d.room <- struct{}{}: // a caller waiting for room goes on, to ErrStopped
	default:
	}
	n := int64(len(d.batch))
	from := min(d.next.Swap(n), n)
	var zero Out
	for i := from; i < n; i++ {
		taken(d.batch[i])
		d.batch[i] = zero
	}
	if r != nil {
		d.drain(r)
	}
	if d.side != nil {
		d.side.dropSide()
	}
	d.flush()
	d.stopped = true
	if d.started {
		close(d.quit)
	}
	return true
}

// driving reports whether the goroutine has started and not been told to
// stop. d.mu must be held.
func (d *driver[In, Out]) driving() bool { return d.started && !d.stopped }

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

// The clock.

// clock is the time base of a Timer or a Keyed: the structures count
// unsigned nanoseconds since start, read from the monotonic clock. Any
// delay up to math.MaxInt64 added to a reading fits, since a reading stays
// far below 2^63 for centuries of uptime.
type clock struct {
	start time.Time
}

func newClock() clock { return clock{start: time.Now()} }

// now reads the clock.
func (c clock) now() uint64 { return uint64(time.Since(c.start)) }

// after returns the reading d after reading now, d < 0 counting as 0.
func after(now uint64, d time.Duration) uint64 { return now + uint64(max(d, 0)) }

// at converts an instant to a reading, clamping instants before start to
// 0, handling instants more than math.MaxInt64 after it, and saturating
// at 2·math.MaxInt64 (about 584 years after start).
func (c clock) at(when time.Time) uint64 {
	d := when.Sub(c.start) // saturates at math.MaxInt64
	if d <= 0 {
		return 0
	}
	if d == math.MaxInt64 {
		rest := when.Sub(c.start.Add(math.MaxInt64))
		return math.MaxInt64 + uint64(max(rest, 0))
	}
	return uint64(d)
}

// timeOf converts a reading back to an instant. A Duration holds less
// than half the readings, so a reading past math.MaxInt64 takes up to
// three steps (math.MaxUint64 is 2·math.MaxInt64 + 1).
func (c clock) timeOf(r uint64) time.Time {
	t := c.start
	for r > math.MaxInt64 {
		t = t.Add(math.MaxInt64)
		r -= math.MaxInt64
	}
	return t.Add(time.Duration(r))
}

// The hand-over to the executor.

// runner hands callbacks to an executor with panics contained: the last
// step of a timeout's path, from the driver's hand-over (handOver) to the
// callback. It is safe for concurrent use; a driver holds a copy.
type runner struct {
	exec    Executor
	inline  bool // exec is Inline: call callbacks directly
	goes    bool // exec is Goroutines: go without a closure
	onPanic func(v any)
	// waiting counts the callbacks handed to goroutines of their own
	// (Goroutines) that have not started yet: one count for a whole Timer,
	// whose drivers yield to them while there are many (see
	// driver.settle).
	waiting *atomic.Int64
}

// newRunner returns the runner of config c, counting the callbacks it
// starts on goroutines in waiting.
func newRunner(c *config, waiting *atomic.Int64) runner {
	return runner{exec: c.exec, inline: c.exec == Inline, goes: c.exec == Goroutines, onPanic: c.panicHandler, waiting: waiting}
}

// invoke calls f: runWith's f for a plain callback.
func invoke(f func()) { f() }

// runWith hands f(a) to r's executor, wrapped in the panic handler. The
// built-in executors need no closure, so handing over allocates nothing
// for Inline and only the goroutine for Goroutines.
func runWith[A any](r *runner, f func(A), a A) {
	switch {
	case r.inline:
		callWith(r, f, a)
	case r.goes:
		r.waiting.Add(1)
		go startWith(r, f, a)
	default:
		r.exec.Execute(func() { callWith(r, f, a) })
	}
}

// callWith runs f(a), passing a panic to r's panic handler.
func callWith[A any](r *runner, f func(A), a A) {
	defer r.contain()
	f(a)
}

// startWith is callWith on a goroutine of its own, counted in r.waiting
// until it starts. Whoever starts the goroutine counts it first.
func startWith[A any](r *runner, f func(A), a A) {
	r.waiting.Add(-1)
	callWith(r, f, a)
}

// call runs f, passing a panic to the panic handler.
func (r *runner) call(f func()) { callWith(r, invoke, f) }

// contain, deferred, passes a panic to the panic handler.
func (r *runner) contain() {
	if v := recover(); v != nil {
		r.onPanic(v)
	}
}

// handOff is how a driver hands the calls f(a) it finds due to its
// runner's executor: one add per call, in deadline order, then one flush
// at the end of the batch. For every executor but [Goroutines], add hands
// the call over at once, and flush has nothing to do.
//
// With Goroutines each call still gets a goroutine of its own, but the
// driver does not start them itself. It gathers up to groupSize calls and
// starts one goroutine for the group, which then starts one for each
// call. A burst costs the driver one go statement per 64 calls instead of
// one per call, and the rest of the work spreads over the Ps: an idle P
// steals a group and starts its goroutines on its own run queue, as the
// runtime runs due timers (and starts time.AfterFunc's goroutines) on
// whichever P finds them. Started one per call from the driver, a burst's
// goroutines also lose their order: a P's local run queue holds 256, and
// beyond that the runtime moves half of it to the global queue, which a
// busy P looks at once in 61 schedules. The oldest callbacks then wait
// behind newer ones, and a large burst fires far later than
// time.AfterFunc's (issue 11; the burst scenario of hourglass-bench
// measures both, see docs/BENCHMARKS.md).
//
// A handOff belongs to one driver and is used only on its goroutine:
// add and flush are not safe for concurrent use. add is O(1); flush is
// O(1) on the driver's side.
type handOff[A any] struct {
	r *runner
	f func(A)
	// group holds the calls gathered for Goroutines and not yet started.
	group []A
}

// groupSize is the most calls one group goroutine starts: a quarter of
// a P's local run queue (256 goroutines in the runtime), so that a group
// and its goroutines fit there with room for several groups, and a
// goroutine per call costs the driver 1/64 of a go statement.
const groupSize = 64

// directMax is the largest group that flush starts from the driver, one
// go statement per call: for so few calls a group goroutine would add
// more than it spreads. A timeout firing on its own, the common case
// when nothing is bursting, costs one goroutine, as it always has.
const directMax = 4

func newHandOff[A any](r *runner, f func(A)) handOff[A] {
	return handOff[A]{r: r, f: f}
}

// add hands the call f(a) to the executor, or with Goroutines adds it to
// the group, which starts when it is full or at flush.
func (h *handOff[A]) add(a A) {
	if !h.r.goes {
		runWith(h.r, h.f, a)
		return
	}
	if h.group == nil {
		h.group = make([]A, 0, groupSize)
	}
	h.group = append(h.group, a)
	if len(h.group) == groupSize {
		h.r.waiting.Add(groupSize)
		go startEach(h.r, h.f, h.group)
		h.group = nil
	}
}

// flush starts the calls add has gathered: the driver calls it once it has
// handed over its batch, so no call waits for a later one.
func (h *handOff[A]) flush() {
	n := len(h.group)
	switch {
	case n == 0:
		return
	case n <= directMax:
		var zero A
		h.r.waiting.Add(int64(n))
		for i, a := range h.group {
			go startWith(h.r, h.f, a)
			h.group[i] = zero // keep nothing alive
		}
		h.group = h.group[:0]
	default:
		h.r.waiting.Add(int64(n))
		go startEach(h.r, h.f, h.group)
		h.group = nil
	}
}

// startEach is a group goroutine: it starts a goroutine for each call, in
// order.
func startEach[A any](r *runner, f func(A), group []A) {
	for _, a := range group {
		go startWith(r, f, a)
	}
}
