package hourglass

import (
	"errors"
	"time"

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
// value timeout that comes due is handed over like any other, in a
// *Timeout shell from sh.shells, so that the driver's batch, Stop and the
// executor see one kind of item.

// maxShells bounds the shells a shard keeps for reuse: enough for the
// value timeouts of a few passes, and no more memory than 48 KiB.
const maxShells = 1024

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
		return false
	}
	sh.limit.release()
	return true
}

// takeValue is sh.values' fire callback: a due value timeout goes to the
// driver's batch in a shell, firing. Once there it can no longer be
// cancelled (its id is free), only taken by Stop. It runs in the driver's
// pass, on the driver goroutine, with sh.mu held.
func (sh *shard) takeValue(id int32, e valueEntry) {
	var to *Timeout
	if n := len(sh.shells); n > 0 {
		to = sh.shells[n-1]
		sh.shells[n-1] = nil
		sh.shells = sh.shells[:n-1]
	} else {
		to = new(Timeout)
	}
	*to = Timeout{f: e.f, sh: sh, when: sh.values.When(id), id: unfiled, state: statusFiring | flagValue}
	sh.due(to)
}

// recycle keeps the shell of a value timeout just handed over, for
// takeValue to use again. Only the driver goroutine calls it (from
// deliver) and takeValue (from its pass), so sh.shells needs no lock; a
// shell that Stop takes is the caller's and never comes back here.
func (sh *shard) recycle(to *Timeout) {
	if len(sh.shells) < maxShells {
		to.f = nil
		sh.shells = append(sh.shells, to)
	}
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
// clock and takes a shard lock for this one timeout, and allocates
// nothing (but to grow the structure, a page at a time), so a pending
// timeout costs its shard a 32-byte entry and the caller a 12-byte
// Handle. Cancel it with [Timer.Cancel]. It is O(1) for the wheels,
// O(log n) for the heap and O(n) for the sorted list.
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
	sh.mu.Unlock()
	sh.settle(wake, late)
	return Handle{shard: sh.index, gen: gen, id: id}, nil
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
	sh.mu.Unlock()
	if ok {
		sh.limit.release()
	}
	return ok
}
