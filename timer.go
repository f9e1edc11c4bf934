package hourglass

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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
// touches the structure. A shard knows its timeouts by small integer ids:
// the default wheel's links are ids, not pointers, and the handle a
// caller holds is 32 bytes with two pointers, so the garbage collector
// has little to trace however many timeouts are pending. With the
// default wheel a pending timeout takes the handle and a 24-byte entry.
// [Timer.Batch] schedules and cancels many timeouts with one clock
// reading and one lock, named by [Handle] values: a pending one then
// takes a 32-byte entry and no handle.
//
// Firing comes before scheduling. While the Timer is behind (a driver
// woke more than a millisecond late, or, with [Goroutines], more than 256
// callbacks wait to start), a scheduling call yields its processor
// (runtime.Gosched) before it returns, a bounded number of times, so that
// a goroutine scheduling timeouts in a tight loop does not starve the
// ones already due.
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
// limit, or an error for a nil f or an invalid option.
func (t *Timer) AfterFunc(d time.Duration, f func()) (*Timeout, error) {
	t.mustBeMade("AfterFunc")
	if f == nil {
		return nil, fmt.Errorf("hourglass: AfterFunc: nil func")
	}
	now := t.now()
	return t.schedule(now, after(now, d), f, nil)
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
// hourglass bench; docs/BENCHMARKS.md has the figures with this pool).
func (t *Timer) pick() *shard {
	sh := t.hint.Get().(*shard)
	t.hint.Put(sh)
	return sh
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
