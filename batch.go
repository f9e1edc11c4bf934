package hourglass

import (
	"errors"
	"math"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// Batch schedules and cancels many timeouts for the price of one: one
// clock reading for all its deadlines and one shard lock, where
// [Timer.AfterFunc] reads the clock, locks and allocates a handle for
// each timeout, and [Timeout.Cancel] locks again. Get one from [Timer.Batch], which holds it only
// while its function runs. Its timeouts are named by [Handle] values and
// filed into the shard's structure when the batch releases the shard's
// lock (when its function returns, or when it moves to another shard):
// a schedule or a cancel through a Batch costs about what the
// structure's add or remove does, and a timeout cancelled in the batch
// that scheduled it never reaches the structure (docs/BENCHMARKS.md, the
// schedule-cancel scenario's batch columns).
//
// Every deadline of a Batch counts from one clock reading, taken at its
// first AfterFunc: a timeout scheduled later in the same batch with delay
// d runs no earlier than d after that reading, and so may run early by
// as long as the batch had then been running. Keep batches short.
//
// A Batch holds the lock of one shard at a time: the shard of the
// caller's P from its first AfterFunc, or the shard of a Handle it
// cancels, which it then keeps for its next schedules. Other goroutines
// scheduling or cancelling on that shard, and its driver, wait for it. A
// Batch is not safe for concurrent use: use it only in the function
// given to Timer.Batch, on that function's goroutine. Using it after the
// function has returned panics.
type Batch struct {
	t *Timer
	// sh is the shard whose lock the batch holds, nil for none.
	sh *shard
	// values is sh.values once AfterFunc may reserve entries in it: sh
	// is not stopped, and cannot be while b holds its lock, and the clock
	// has been read. nil until then, and again when b changes shards,
	// which files what it reserved first (unlock).
	values *queue.Queue[valueEntry]
	// now is the clock reading the deadlines count from, if timed.
	now   uint64
	timed bool
	ended bool // the function has returned
}

// Batch calls fn with a [Batch] that schedules and cancels timeouts on t
// with one clock reading and one lock (see Batch), and releases the lock
// when fn returns or panics; what fn did before a panic stands. It costs
// one small allocation, however many timeouts fn handles.
//
// While fn runs, the batch may hold a lock that t's other methods, and
// the methods of t's [Timeout] values, need on the same goroutine: fn
// must use only the Batch's own methods on t, or it may deadlock. Batch
// is safe for concurrent use: batches on different goroutines run at once
// on different shards, and wait for each other on the same one.
func (t *Timer) Batch(fn func(b *Batch)) {
	t.mustBeMade("Batch")
	b := &Batch{t: t}
	defer b.end()
	fn(b)
}

// AfterFunc schedules f to run d from the batch's clock reading (taken
// at its first AfterFunc) and returns its handle. A d of zero or less
// runs f promptly. It returns [ErrStopped] after Stop,
// [ErrTooManyPending] at the pending limit, or an error for a nil f or
// an invalid option. It is O(1) for the wheels, O(log n) for the heap and
// O(n) for the sorted list, and allocates nothing, but to grow the
// structure a page at a time.
func (b *Batch) AfterFunc(d time.Duration, f func()) (Handle, error) {
	if b.values == nil || f == nil {
		// The first call on this shard, or one that fails. (An ended
		// batch holds no shard, nor does a Timer with an invalid option.)
		if err := b.start(f); err != nil {
			return Handle{}, err
		}
	}
	sh := b.sh
	if !sh.limit.acquire() {
		return Handle{}, ErrTooManyPending
	}
	var when uint64 // 0: due at once (see flagDue)
	if d > 0 {
		when = b.now + uint64(d)
	}
	gen := sh.nextGen()
	id := b.values.Reserve(when, valueEntry{f: f, gen: gen})
	return Handle{shard: sh.index, gen: gen, id: id}, nil
}

// start is AfterFunc's way when b may not yet file on the shard it holds,
// or holds none, or the call fails: it returns the error, or readies b
// to file on the shard it holds, that of the caller's P if none.
func (b *Batch) start(f func()) error {
	b.mustBeOpen("AfterFunc")
	t := b.t
	if t.err != nil {
		return t.err
	}
	if f == nil {
		return errNilBatchFunc
	}
	sh := b.sh
	if sh == nil {
		sh = &t.shards[0]
		if len(t.shards) > 1 {
			sh = t.pick()
		}
		b.lock(sh)
	}
	if sh.stopped {
		return ErrStopped
	}
	if !b.timed {
		b.now, b.timed = sh.now(), true
	}
	b.values = sh.valueQueue()
	return nil
}

var errNilBatchFunc = errors.New("hourglass: Batch.AfterFunc: nil func")

// Cancel cancels the timeout h names, as [Timer.Cancel] does, and reports
// whether this call kept it from running. A Handle of another shard than
// the one the batch holds makes the batch release that lock and take the
// other: cancelling in the order the handles were made, shard by shard,
// takes fewest locks. It is O(1) for the wheels and the list and
// O(log n) for the heap.
func (b *Batch) Cancel(h Handle) bool {
	if b.values != nil && b.sh.index == h.shard {
		// The shard b files on: sh.cancelValue(h) written out, as
		// b.values is known to be there, which saves a call on every
		// pair (BenchmarkBatch_AfterFuncCancel_Pending under callgrind). A
		// timeout this batch scheduled is only reserved: RemoveIf frees
		// its entry without touching the structure.
		if !b.values.RemoveIf(h.id, h.names) {
			if b.sh.sideEmpty() {
				return false
			}
			// An Arm's, it may wait in the ring, not yet filed.
			b.sh.drainForCancel()
			if !b.values.RemoveIf(h.id, h.names) {
				return false
			}
		}
		b.sh.limit.release()
		return true
	}
	if sh := b.sh; sh != nil && sh.index == h.shard {
		return sh.cancelValue(h)
	}
	b.mustBeOpen("Cancel")
	t := b.t
	if int(h.shard) >= len(t.shards) {
		return false
	}
	sh := &t.shards[h.shard]
	b.lock(sh)
	return sh.cancelValue(h)
}

// lock makes sh the shard b holds, releasing the one it held.
func (b *Batch) lock(sh *shard) {
	b.unlock()
	sh.mu.Lock()
	b.sh = sh
}

// unlock releases the lock b holds, if any, first filing the timeouts b
// scheduled there and not cancelled, and starting or waking the shard's
// driver for the earliest of them.
func (b *Batch) unlock() {
	sh := b.sh
	if sh == nil {
		return
	}
	wake := false
	if b.values != nil {
		if earliest := b.values.FileReserved(); earliest != math.MaxUint64 {
			wake = sh.armed(earliest)
		}
	}
	late := b.timed && sh.overslept(b.now)
	b.sh, b.values = nil, nil
	sh.mu.Unlock()
	sh.settle(wake, late)
}

// end releases b when its function returns.
func (b *Batch) end() {
	b.ended = true
	b.unlock()
}

// mustBeOpen panics if b's function has returned: the Batch holds no lock
// any more, and a caller that kept it has a bug that no error would show.
func (b *Batch) mustBeOpen(method string) {
	if b.ended {
		panic("hourglass: Batch." + method + " called after the Batch's function returned")
	}
}
