package hourglass

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/queue"
)

// Keyed keeps at most one pending timeout per key and calls expire(key)
// when it comes due: the shape of connection idle timeouts, heartbeats and
// request deadlines that are pushed back on every packet. Where the same
// with Go's runtime timers takes a map[K]*time.Timer and a Reset per event,
// [Keyed.Set] on a pending key allocates nothing, and pushing a deadline
// later only rewrites the key's deadline: the key stays where the
// structure filed it and is filed again at its new deadline when that
// earlier one comes.
//
// Keys live in a [queue.KeyQueue]: a hash table whose records are the
// structure's entries, so a Set on a pending key is one hash probe that
// lands on the key's deadline. For K = uint64 it takes 40 to 60 bytes per
// key, and for a key type without pointers (integers, arrays, structs of
// them) it holds no pointer, so the garbage collector does not scan it.
// Every structure works (WithHashedWheel, WithHeap, WithSortedList too);
// only the default hierarchical wheel moves a key later by rewriting its
// deadline alone, where the others take it out and file it again.
//
// Without a pending limit, Sets are applied in batches of up to 256: a
// Set records the key and its deadline and returns, and the batch is
// applied when it fills, when any other method runs, or when the driver
// wakes, whichever is first. Nothing can observe the difference (every
// method sees every Set before it), and at 10^6 keys the batch overlaps
// the cache misses that applying Sets one by one pays in full.
//
// What a Set still pays each time is a reading of the monotonic clock and
// the lock, most of its cost once the store is in cache. A caller that
// handles events in batches (the ready connections of an event loop's
// poll, a batch of datagrams) can move all their keys with one
// [Keyed.SetMany], which pays for both once per call.
//
// Each key ends each of its timeouts exactly one way: expire is handed the
// key once, or [Keyed.Remove] returns true, or [Keyed.Stop] returns the
// key. Like [Timer], a Keyed never fires early and at most one tick late,
// runs expire through its executor with panics contained, and has one
// driver goroutine that sleeps until the next deadline, and a Set yields
// while it is behind, as Timer's scheduling calls do. Unlike Timer it is
// not sharded: one lock guards it, and [NewKeyed] rejects [WithShards].
//
// Keyed is safe for concurrent use by multiple goroutines. Make one with
// [NewKeyed]; the zero Keyed is not usable: its methods panic.
type Keyed[K comparable] struct {
	// The driver's inbox holds Sets not yet applied to keys, in call
	// order, and its batch the keys due at its last pass.
	driver[queue.KeyDeadline[K], K] // mu guards the fields below as well

	expire    func(key K)
	err       error
	structure string
	limit     int // 0: none

	keys *queue.KeyQueue[K] // nil if err is set
	take func(key K)        // k.due as a func, made once
	// out hands the batch's keys to expire through the executor. Used only
	// by the driver goroutine.
	out handOff[K]
}

// NewKeyed returns a Keyed that calls expire(key) for each key whose
// timeout comes due. It takes the options of [New] but [WithShards]: the
// structure (a hierarchical wheel with a 1 ms tick by default), the
// executor, the pending limit (the number of keys with a pending timeout)
// and the panic handler. As with New, a nil expire or a bad option is
// reported by every Set, and so is WithShards, which does not apply to a
// Keyed.
func NewKeyed[K comparable](expire func(key K), opts ...Option) *Keyed[K] {
	c := defaultConfig()
	c.keyed = true
	for _, o := range opts {
		o(&c)
	}
	if expire == nil && c.err == nil {
		c.err = fmt.Errorf("hourglass: NewKeyed: nil expire func")
	}
	k := &Keyed[K]{
		expire:    expire,
		err:       c.err,
		structure: c.structure,
		limit:     c.maxPending,
	}
	if c.err == nil {
		k.keys = queue.NewKeyQueue[K](c.queue)
	}
	k.driver.init(k, newClock(), newRunner(&c, new(atomic.Int64)), newExits())
	k.take = k.due
	k.out = newHandOff(&k.runner, expire)
	return k
}

// mustBeMade panics if k is a zero Keyed, not made by [NewKeyed]: that is
// misuse, and it must fail at once on the caller's goroutine, not later in
// a driver goroutine with nothing to drive. (NewKeyed always sets take.)
func (k *Keyed[K]) mustBeMade(method string) {
	if k.take == nil {
		panic("hourglass: " + method + " called on uninitialized Keyed; make one with NewKeyed")
	}
}

// Set schedules key to expire d from now, or moves its pending timeout
// there; the old deadline never fires. A d of zero or less expires key
// promptly. Set on a pending key allocates nothing. It returns
// [ErrStopped] after Stop, and [ErrTooManyPending] for a new key at the
// pending limit.
func (k *Keyed[K]) Set(key K, d time.Duration) error {
	k.mustBeMade("Set")
	if k.err != nil {
		return k.err
	}
	now := k.now()
	when := dueAt(now, d)
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return ErrStopped
	}
	if k.limit > 0 {
		if err := k.addLimited(key, when); err != nil {
			k.mu.Unlock()
			return err
		}
	} else {
		k.put(queue.KeyDeadline[K]{Key: key, When: when})
	}
	wake := k.armed(when)
	late := k.overslept(now)
	k.mu.Unlock()
	k.settle(wake, late)
	return nil
}

// SetMany does what Set(key, d) does for each of keys in turn, with one
// reading of the clock and one lock for all of them: every key is due at
// the same instant, d after the call. It is for callers that handle events
// in batches (an event loop's ready connections, a batch of datagrams) and
// would otherwise call Set once per event; the reading is taken after the
// events arrived, so no key expires early. A key listed twice is set
// twice, to the same deadline.
//
// SetMany returns how many keys it set, from the front of keys. It stops
// at the first key it cannot set: at a new key when the pending limit is
// reached ([ErrTooManyPending]), or at once after Stop ([ErrStopped]). It
// takes O(len(keys)) time and allocates nothing for pending keys.
func (k *Keyed[K]) SetMany(keys []K, d time.Duration) (int, error) {
	k.mustBeMade("SetMany")
	if k.err != nil {
		return 0, k.err
	}
	now := k.now()
	when := dueAt(now, d)
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return 0, ErrStopped
	}
	var err error
	n := 0
	if k.limit > 0 {
		for _, key := range keys {
			if err = k.addLimited(key, when); err != nil {
				break
			}
			n++
		}
	} else {
		for _, key := range keys {
			k.put(queue.KeyDeadline[K]{Key: key, When: when})
		}
		n = len(keys)
	}
	wake := n > 0 && k.armed(when)
	late := k.overslept(now)
	k.mu.Unlock()
	k.settle(wake, late)
	return n, err
}

// dueAt returns the reading d after now, or 0 for a d of zero or less: a
// key due at once is stored as due at reading 0, so that it expires on
// the driver's next pass, where its real deadline would be rounded up to
// the next tick boundary, up to a whole tick away.
func dueAt(now uint64, d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return after(now, d)
}

// addLimited sets key to expire at when under a pending limit. Whether
// key is new decides the error, so the Set is applied at once. k.mu is
// held and k is not stopped.
func (k *Keyed[K]) addLimited(key K, when uint64) error {
	k.flush()
	if _, ok := k.keys.When(key); !ok && k.keys.Len() >= k.limit {
		return ErrTooManyPending
	}
	k.keys.Set(key, when)
	return nil
}

// file implements worker: it applies the Sets waiting in the driver's
// inbox (see batchSize) in call order. Everything that reads keys
// flushes first, so no caller can see a Set unapplied, and the driver
// flushes before it looks for due keys, so a deadline a waiting Set
// moved never fires: Set wakes the driver for an earlier deadline, as it
// would without the wait. k.mu is held.
func (k *Keyed[K]) file(sets []queue.KeyDeadline[K]) { k.keys.SetAll(sets) }

// Remove cancels key's pending timeout and reports whether this call
// prevented its expiry.
func (k *Keyed[K]) Remove(key K) bool {
	k.mustBeMade("Remove")
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		return false
	}
	k.flush()
	return k.keys.Remove(key)
}

// Deadline reports when key's pending timeout is due, and false if key has
// none. A key set with a d of zero or less is due at once: until it
// expires, which it does promptly, Deadline reports the current time.
func (k *Keyed[K]) Deadline(key K) (time.Time, bool) {
	k.mustBeMade("Deadline")
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		return time.Time{}, false
	}
	k.flush()
	when, ok := k.keys.When(key)
	if !ok {
		return time.Time{}, false
	}
	if when == 0 {
		return time.Now(), true // due at once (see dueAt)
	}
	return k.timeOf(when), true
}

// Len reports the number of keys with a pending timeout.
func (k *Keyed[K]) Len() int {
	k.mustBeMade("Len")
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.len()
}

// len reports the number of pending keys. k.mu is held.
func (k *Keyed[K]) len() int {
	if k.keys == nil {
		return 0
	}
	k.flush()
	return k.keys.Len()
}

// Stop cancels every pending timeout and returns their keys. Len is
// then 0, Set returns [ErrStopped], and the driver goroutine exits. Like
// [Timer.Stop], it waits for nothing, so it may be called from anywhere,
// expire included: keys due in the driver's batch and not yet handed over
// are returned, and a call of expire the driver had begun to hand over
// when Stop was called may start after Stop returns. [Keyed.Done] says
// when the driver has exited. A second Stop returns nil.
func (k *Keyed[K]) Stop() []K {
	k.mustBeMade("Stop")
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return nil
	}
	var out []K
	k.halt(func(key K) { out = append(out, key) })
	if k.keys != nil {
		k.keys.Drain(func(key K) { out = append(out, key) })
	}
	k.mu.Unlock()
	k.exits.exited() // Stop's count (see exits)
	return out
}

// Done returns a channel that is closed once Stop has been called and the
// driver goroutine has exited, as [Timer.Done] does for a Timer: from then
// on k hands nothing to its executor, and calls of expire the driver ran
// itself ([Inline]) have returned. expire running on the driver must not
// wait for Done.
func (k *Keyed[K]) Done() <-chan struct{} {
	k.mustBeMade("Done")
	return k.exits.done
}

// Stats returns a snapshot of k, as [Timer.Stats] does for a Timer.
func (k *Keyed[K]) Stats() Stats {
	k.mustBeMade("Stats")
	k.mu.Lock()
	defer k.mu.Unlock()
	s := Stats{Structure: k.structure, Shards: 1, Pending: k.len(), Wakeups: k.wakeups}
	if k.driving() {
		s.Drivers = 1
	}
	return s
}

// advance implements worker: the due keys go to the driver's batch.
func (k *Keyed[K]) advance(now uint64) (uint64, bool) {
	k.keys.Advance(now, k.take)
	return k.keys.Next()
}

// deliver implements worker: a due key goes to the executor, through
// k.out (see handOff).
func (k *Keyed[K]) deliver(key K) { k.out.add(key) }

// handedOver implements worker: the batch is handed over.
func (k *Keyed[K]) handedOver() { k.out.flush() }
