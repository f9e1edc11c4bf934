package hourglass

// This file is the Timer: its API, then its pending limit (limit), then
// the shards it is made of (shard), each a worker of a driver
// (driver.go).

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/hourglass-go/hourglass/queue"
)

// Timer runs callbacks at or after their deadlines. It keeps its pending
// timeouts in one of four structures chosen by an [Option] (a hierarchical
// timing wheel by default) and hands due callbacks to an [Executor].
//
// A Timer is split into shards, each with a lock, a structure and a driver
// goroutine that is started on the shard's first timeout and sleeps until
// the next deadline: with nothing pending it never wakes. Scheduling and
// cancelling take one shard lock and are O(1) for the wheels, so a Timer
// holds millions of timeouts cheaply. As in Netty's HashedWheelTimer, a
// new timeout waits in a short list and is filed into the structure with
// up to 255 others, when the list is full or the driver next wakes: one
// cancelled before then (the request that completed in time) never
// touches the structure. While a shard's driver is awake, as through a
// burst, [Timer.AfterFunc] puts its timeout instead into a lock-free
// ring of 4,096 that the driver takes from on each pass, so that callers
// and the driver do not take turns at the shard's lock; when the ring is
// full, the timeout goes to the next shard's (a driver per core).
// [Timer.Arm] does the same through a burst in a ring of its own, with
// ids for its Handles that the driver sets aside beforehand. A
// shard knows its timeouts by small integer ids:
// the default wheel's links are ids, not pointers, and the handle a
// caller holds is 32 bytes with two pointers, so the garbage collector
// has little to trace however many timeouts are pending. With the
// default wheel a pending timeout takes the handle and a 24-byte entry.
// [Timer.Batch] schedules and cancels many timeouts with one clock
// reading and one lock, named by [Handle] values: a pending one then
// takes a 32-byte entry and no handle. [Timer.Arm] schedules one timeout
// named by a Handle, allocating nothing.
//
// Firing comes before scheduling. While the Timer is behind (a driver
// woke more than a millisecond late, or, with [Goroutines], more than 256
// callbacks wait to start), a scheduling call yields its processor
// (runtime.Gosched) before it returns, a bounded number of times, so that
// a goroutine scheduling timeouts in a tight loop does not starve the
// ones already due; and an AfterFunc that finds the rings full waits for
// the driver's next pass, up to 10 ms, before it files what they hold
// itself (a callback on the driver waits so once a pass).
//
// Timer is safe for concurrent use by multiple goroutines. Create one with
// [New], use it from anywhere, and [Timer.Stop] it when done; a process
// usually needs one (see [Default]). The zero Timer is not usable: its
// methods panic. A Timer first used inside a testing/synctest bubble
// belongs to that bubble.
type Timer struct {
	clock
	structure string // for Stats
	err       error  // from the options; returned by every scheduling call
	limit     limit  // WithMaxPending's, shared by the shards
	// waiting counts the callbacks the shards have started on goroutines
	// and that have not yet begun (see driver.settle). Each callback
	// writes it, so it has a cache line of its own, apart from the fields
	// every scheduling call reads.
	_       [56]byte
	waiting atomic.Int64
	_       [56]byte

	shards  []shard
	stopped atomic.Bool
	exits   *exits // for Done

	// hint holds *shard values, one per P in the common case: the shard
	// new timeouts scheduled on that P go to (see pick). next numbers the
	// shards hint hands out when it has none for a P.
	hint sync.Pool
	next atomic.Uint32
}

// New returns a Timer configured by opts. With no options it uses a
// hierarchical wheel with a 1 ms tick, runs callbacks on goroutines of
// their own, has no pending limit and logs panics with log/slog.
//
// An invalid option does not make New fail: the Timer keeps the error and
// returns it from every scheduling call, so a bad configuration surfaces
// where timeouts are made.
func New(opts ...Option) *Timer {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	t := &Timer{
		clock:     newClock(),
		structure: c.structure,
		err:       c.err,
		limit:     limit{max: int64(c.maxPending)},
		exits:     newExits(),
	}
	if c.err != nil {
		return t
	}
	t.shards = make([]shard, c.shards)
	for i := range t.shards {
		t.shards[i].init(i, &c, t.clock, &t.limit, t.exits, &t.waiting)
	}
	t.hint.New = func() any {
		return &t.shards[int(t.next.Add(1)-1)%len(t.shards)]
	}
	return t
}

// AfterFunc schedules f to run d from now and returns its handle. A d of
// zero or less runs f promptly. Any d up to math.MaxInt64 is held exactly.
// It returns [ErrStopped] after Stop, [ErrTooManyPending] at the pending
// limit, or an error for a nil f or an invalid option. While the Timer is
// far behind, it may wait up to 10 ms for a driver (see [Timer]).
func (t *Timer) AfterFunc(d time.Duration, f func()) (*Timeout, error) {
	t.mustBeMade("AfterFunc")
	if f == nil {
		return nil, fmt.Errorf("hourglass: AfterFunc: nil func")
	}
	if t.err != nil {
		return nil, t.err
	}
	// schedule, scheduleOn and shard.schedule written out for a one-shot
	// timeout, without their call layers and their tests for a periodic
	// one, with settle's test inlined as well: the call layers are a
	// measurable share of an AfterFunc+Cancel pair
	// (BenchmarkTimer_AfterFuncCancel_Pending under callgrind; see
	// docs/BENCHMARKS.md, schedule-cancel).
	sh := &t.shards[0]
	if len(t.shards) > 1 {
		sh = t.pick()
	}
	if !t.limit.acquire() {
		return nil, ErrTooManyPending
	}
	now := t.now()
	when := after(now, d)
	to := &Timeout{f: f, sh: sh, when: when, id: unfiled, state: pendingState(0, when <= now)}
	r, ok, settled, full := sh.offer(to)
	if full && len(t.shards) > 1 {
		// This shard's driver is far behind: the timeout goes to the next
		// shard, whose driver, on another core, may not be (see spill).
		sh = t.spill(sh)
		to.sh = sh
		r, ok, settled, full = sh.offer(to)
	}
	if full && sh.awaitRoom() {
		r, ok, settled, full = sh.offer(to)
	}
	if ok {
		if !settled {
			return sh.settleRing(r, to, now)
		}
		sh.settle(false, false)
		return to, nil
	}
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		t.limit.release()
		return nil, ErrStopped
	}
	if full {
		sh.flush() // the driver is far behind: file what waits for it
	}
	sh.put(to)
	wake := sh.armed(when)
	late := sh.overslept(now)
	sh.mu.Unlock()
	sh.settle(wake, late)
	return to, nil
}

// AtFunc schedules f to run at when and returns its handle. A when not
// after the call runs f promptly. A when more than 2·math.MaxInt64 ns (about 584
// years) after New saturates there (see [Timeout.Deadline]). See
// [Timer.AfterFunc] for the errors.
func (t *Timer) AtFunc(when time.Time, f func()) (*Timeout, error) {
	t.mustBeMade("AtFunc")
	if f == nil {
		return nil, fmt.Errorf("hourglass: AtFunc: nil func")
	}
	return t.schedule(t.now(), t.at(when), f, nil)
}

// schedule makes a timeout for f due at when and queues it on a shard, now
// being the clock reading when counts from: a when not after now is due
// at once (see flagDue). p is nil for a one-shot timeout; for a periodic
// one, f is p.run.
func (t *Timer) schedule(now, when uint64, f func(), p *periodic) (*Timeout, error) {
	if t.err != nil {
		return nil, t.err
	}
	sh := &t.shards[0]
	if len(t.shards) > 1 {
		sh = t.pick()
	}
	return t.scheduleOn(sh, now, when, f, p)
}

// scheduleOn is schedule on shard sh.
func (t *Timer) scheduleOn(sh *shard, now, when uint64, f func(), p *periodic) (*Timeout, error) {
	if !t.limit.acquire() {
		return nil, ErrTooManyPending
	}
	var flags int32
	if p != nil {
		flags = flagPeriodic
	}
	to := &Timeout{f: f, sh: sh, when: when, id: unfiled, state: pendingState(flags, when <= now)}
	if p != nil {
		p.to = to
	}
	if err := sh.schedule(to, p, now); err != nil {
		t.limit.release()
		return nil, err
	}
	return to, nil
}

// mustBeMade panics if t is a zero Timer, not made by [New]: that is
// misuse, as calling Stop on a time.Timer not made by NewTimer is, and it
// must fail at once on the caller's goroutine. (A Timer whose options were
// invalid has no shards either, but keeps the error to return.)
func (t *Timer) mustBeMade(method string) {
	if t.shards == nil && t.err == nil {
		panic("hourglass: " + method + " called on uninitialized Timer; make one with New")
	}
}

// pick returns the shard for a new timeout when there are several: the
// one its P last used, so
// that goroutines on different cores use different shard locks and keep
// them in their own caches, as the runtime's timers use per-P heaps.
// There is no supported way to read a P's id, but a sync.Pool keeps one
// value per P (its private slot) and hands it back on the same P: the
// pool holds each P's shard, given round robin when a P has none (at
// first, and when two garbage collections in a row have found it
// unused). A goroutine that moves to another P between Get and Put only
// costs locality. Picking at random instead made two goroutines slower
// than one, as both fought over every lock (the parallel scenario of
// hourglass-bench; docs/BENCHMARKS.md has the figures with this pool).
func (t *Timer) pick() *shard {
	sh := t.hint.Get().(*shard)
	t.hint.Put(sh)
	return sh
}

// spill returns the shard after sh, for a timeout that sh's driver is
// too far behind to take (its ring is full): a burst scheduled from one
// goroutine then fires on the drivers of several shards, a driver per
// core, instead of the one its P's shard has.
func (t *Timer) spill(sh *shard) *shard {
	i := int(sh.index) + 1
	if i == len(t.shards) {
		i = 0
	}
	return &t.shards[i]
}

// Pending reports the number of timeouts that will still run: one-shot
// timeouts not yet handed to the executor, and periodic timeouts that have
// not ended. It is 0 after Stop. Pending takes every shard's lock in turn,
// so it is a snapshot, not an atomic count.
func (t *Timer) Pending() int {
	t.mustBeMade("Pending")
	return t.Stats().Pending
}

// Stop cancels every timeout not yet handed to the executor and returns
// them, in no particular order, in O(n) for n pending. Pending is then 0,
// scheduling returns [ErrStopped], and the driver goroutines exit. Stop
// does not wait for anything: not for callbacks already handed over
// (like time.Timer's Stop), and not for the drivers, so it may be called
// from anywhere, a callback included, whatever the executor. A driver
// that had begun to hand a timeout to the executor when Stop was called
// finishes with that one: its callback may start after Stop returns (with
// [Inline], it runs on the driver). [Timer.Done] says when the drivers
// have exited. Timeouts due together in a driver's batch and not yet
// handed over are returned as never run. A timeout scheduled through a
// [Batch] that never ran is returned as a *Timeout made for it, cancelled
// and with its deadline, since its caller holds only a [Handle]; the
// Handle then names nothing. Periodic timeouts end; one in
// the middle of a run finishes that run and is not returned. An executor
// such as a [Pool] is not closed. A second Stop returns nil.
func (t *Timer) Stop() []*Timeout {
	t.mustBeMade("Stop")
	if !t.stopped.CompareAndSwap(false, true) {
		return nil
	}
	var out []*Timeout
	for i := range t.shards {
		out = t.shards[i].stop(out)
	}
	t.limit.reset()
	t.exits.exited() // Stop's count (see exits)
	return out
}

// Done returns a channel that is closed once Stop has been called and
// every driver goroutine has exited: from then on the Timer hands nothing
// to its executor, and the callbacks its drivers ran themselves ([Inline],
// or a [Pool] running a task on its caller) have returned. Callbacks
// handed to goroutines or to Pool workers are not waited for; wait for
// them as for time.AfterFunc's, through the callbacks themselves. A
// callback that runs on a driver must not wait for Done: it would wait
// for itself.
func (t *Timer) Done() <-chan struct{} {
	t.mustBeMade("Done")
	return t.exits.done
}

// The pending limit.

// limit is a Timer's [WithMaxPending] count: one place per pending
// timeout, shared by its shards. It is safe for concurrent use; with no
// limit it costs a comparison.
type limit struct {
	max  int64 // 0: no limit
	live atomic.Int64
}

// acquire takes one place under the limit, reporting false if the limit
// is reached. release gives one back.
func (l *limit) acquire() bool {
	if l.max == 0 {
		return true
	}
	if l.live.Add(1) > l.max {
		l.live.Add(-1)
		return false
	}
	return true
}

func (l *limit) release() {
	if l.max != 0 {
		l.live.Add(-1)
	}
}

// reset gives every place back, at Stop.
func (l *limit) reset() {
	if l.max != 0 {
		l.live.Store(0)
	}
}

// The shards.

// shard is one independent part of a Timer: a driver (its lock, clock,
// goroutine and batches) over a [queue.Queue] of timeouts. See [Timer].
// It is the driver's worker: it files new timeouts, collects due ones and
// delivers them; the driver decides when.
type shard struct {
	driver[*Timeout, dueItem] // mu guards the fields below as well

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
	// arms is Arm's lock-free way in while the driver is awake through a
	// burst, nil otherwise (see armInbox); written under mu. armsAwake
	// counts the Arms that took mu in this pass while the driver was
	// awake. Guarded by mu.
	arms      atomic.Pointer[armInbox]
	armsAwake int
	// cancelDrains counts the Cancels that drained the armInbox's ring
	// in this pass (see drainForCancel). Guarded by mu.
	cancelDrains int
	// armsHeld counts down the passes during which the shard makes no
	// armInbox (see drainForCancel). Guarded by mu.
	armsHeld int
	// armsTail is the armInbox's ring's tail at the last pass, and
	// armsQuiet counts the passes since it last moved (see quietArms).
	// Guarded by mu.
	armsTail  uint64
	armsQuiet int
	// spareArms is the last armInbox dropped, for armedLocked to use
	// again, held until the garbage collector takes it. Guarded by mu.
	spareArms weak.Pointer[armInbox]

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
	sh.rings = true
	sh.collect = sh.take
	sh.collectValue = sh.takeValue
	sh.side = sh
	sh.out = newHandOff(&sh.runner, invoke)
}

// dueItem is what a shard's driver finds due and hands over: a timeout
// scheduled with a *Timeout (to), or a value timeout (to is nil), its
// callback f and deadline when (see takeValue).
type dueItem struct {
	to   *Timeout
	f    func()
	when uint64
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

// settleRing ends a call whose new one-shot timeout to went into ring r
// (see driver.offer) when the driver may not have seen it: it files what
// waits in r and wakes the driver if to is due before it planned to
// look; or, if Stop has run, returns ErrStopped unless Stop took to
// (then cancelled, and among what Stop returned). now is the reading
// to's deadline counts from.
func (sh *shard) settleRing(r *ring[*Timeout], to *Timeout, now uint64) (*Timeout, error) {
	sh.mu.Lock()
	if sh.stopped {
		sh.mu.Unlock()
		if to.cancelUnfiled() {
			sh.limit.release()
			return nil, ErrStopped
		}
		return to, nil
	}
	sh.drain(r)
	wake := sh.armed(to.when)
	late := sh.overslept(now)
	sh.mu.Unlock()
	sh.settle(wake, late)
	return to, nil
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

// pendingState is the state of a timeout made pending, which waits in
// the inbox (flagUnfiled), with the flags kept (flagPeriodic) and flagDue
// set if due.
func pendingState(flags int32, due bool) int32 {
	s := flags | statusPending | flagUnfiled
	if due {
		s |= flagDue
	}
	return s
}

// file implements worker: it puts the pending timeouts of the inbox into
// q. One cancelled meanwhile, or filed through an earlier entry (Cancel
// and Reset schedule a timeout again), is dropped. A CompareAndSwap
// clears flagUnfiled, as Cancel may end the timeout meanwhile without
// sh.mu. sh.mu is held.
func (sh *shard) file(in []*Timeout) {
	for _, to := range in {
		if to.fileFrom() {
			to.id = sh.q.Add(to.filedAt(), to)
		}
	}
}

// fileFrom clears flagUnfiled of a pending timeout that waits in the
// inbox, reporting whether it did: false for one that Cancel has ended,
// or that is filed already. sh.mu is held.
func (to *Timeout) fileFrom() bool {
	for {
		old := to.load()
		if old&(statusMask|flagUnfiled) != statusPending|flagUnfiled {
			return false
		}
		if atomic.CompareAndSwapInt32(&to.state, old, old&^flagUnfiled) {
			return true
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
		} else if !to.periodic() {
			// In the inbox, where Cancel may end it without sh.mu.
			if !to.cancelUnfiled() {
				return sh.cancel(to) // it did, meanwhile
			}
			sh.end(to)
			return true
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
		if !to.setDeadline(when, due) {
			return sh.reset(to, when, due) // cancelled meanwhile
		}
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
	sh.armsAwake, sh.cancelDrains = 0, 0
	if sh.armsHeld > 0 {
		sh.armsHeld--
	}
	if a := sh.arms.Load(); a != nil {
		sh.quietArms(a)
	}
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
	sh.due(dueItem{to: to})
}

// deliver implements worker: it hands a due timeout to the executor
// (through sh.out, see handOff), unless Cancel or Reset has called its
// run off (it is no longer firing). A value timeout's run cannot be
// called off once due: only Stop takes it, and halt takes only the items
// that handOver has not claimed.
func (sh *shard) deliver(it dueItem) {
	to := it.to
	if to == nil {
		sh.limit.release()
		sh.out.add(it.f)
		return
	}
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
	sh.halt(func(it dueItem) {
		switch {
		case it.to == nil:
			// A value timeout, whose caller holds only a Handle.
			out = append(out, &Timeout{f: it.f, sh: sh, when: it.when, id: unfiled, state: statusCancelled | flagValue})
		case it.to.leaveFiring(statusCancelled):
			out = append(out, it.to)
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
