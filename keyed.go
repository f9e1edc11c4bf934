package hourglass

import (
	"fmt"
	"time"
)

// Keyed keeps at most one pending timeout per key and calls expire(key)
// when it comes due: the shape of connection idle timeouts, heartbeats and
// request deadlines that are pushed back on every packet. Where the same
// with Go's runtime timers takes a map[K]*time.Timer and a Reset per event,
// [Keyed.Set] on a pending key allocates nothing, and pushing a deadline
// later only rewrites the key's map entry: the key stays where the
// structure filed it and is filed again at its new deadline when that
// earlier one comes.
//
// A Go map takes each key to its int32 id and current deadline; the
// default structure, a [queue.IndexWheel], keeps each id's filed deadline
// and key in a table of ids linked by index. For a key type without
// pointers (integers, arrays, structs of them) none of that storage holds
// a pointer, so the garbage collector does not scan it. The entry-based
// structures (WithHashedWheel, WithHeap, WithSortedList) work too, with a
// pointer per link.
//
// Each key ends each of its timeouts exactly one way: expire is handed the
// key once, or [Keyed.Remove] returns true, or [Keyed.Stop] returns the
// key. Like [Timer], a Keyed never fires early and at most one tick late,
// runs expire through its executor with panics contained, and has one
// driver goroutine that sleeps until the next deadline. Unlike Timer it is
// not sharded: one lock guards it, and [WithShards] has no effect.
//
// Keyed is safe for concurrent use by multiple goroutines.
type Keyed[K comparable] struct {
	driver // mu guards the fields below as well
	clock
	runner
	expire    func(key K)
	err       error
	structure string
	limit     int // 0: none

	q     keyQueue[K]
	state map[K]keyState
	ids   ids

	// batch and next are the driver's, as for a Timer shard.
	batch []K
	next  int
	take  func(id int32, key K) // k.expireID, made once
}

// keyState is what the map holds for a pending key: its id, and its
// deadline, which may be later than the one it is filed at in q. Keeping
// the deadline in the map lets Set push it back with one map lookup and
// nothing else: at 10^6 keys a Set is bound by cache misses, and this
// saves the one on the structure's entry. The entry is re-filed when its
// old deadline comes (see expireID).
type keyState struct {
	id   int32
	when uint64
}

// NewKeyed returns a Keyed that calls expire(key) for each key whose
// timeout comes due. It takes the same options as [New]: the structure
// (a hierarchical wheel with a 1 ms tick by default), the executor, the
// pending limit (the number of keys with a pending timeout) and the panic
// handler. As with New, a nil expire or a bad option is reported by every
// Set.
func NewKeyed[K comparable](expire func(key K), opts ...Option) *Keyed[K] {
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	if expire == nil && c.err == nil {
		c.err = fmt.Errorf("hourglass: NewKeyed: nil expire func")
	}
	k := &Keyed[K]{
		clock:     newClock(),
		runner:    newRunner(&c),
		expire:    expire,
		err:       c.err,
		structure: c.structure,
		limit:     c.maxPending,
		state:     make(map[K]keyState),
	}
	if c.err == nil {
		k.q = newKeyQueue[K](&c)
	}
	k.driver.init(k)
	k.take = k.expireID
	return k
}

// Set schedules key to expire d from now, or moves its pending timeout
// there; the old deadline never fires. A d of zero or less expires key
// promptly. Set on a pending key allocates nothing. It returns
// [ErrStopped] after Stop, and [ErrTooManyPending] for a new key at the
// pending limit.
func (k *Keyed[K]) Set(key K, d time.Duration) error {
	if k.err != nil {
		return k.err
	}
	when := k.deadline(d)
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return ErrStopped
	}
	if st, ok := k.state[key]; ok {
		if when < st.when {
			k.q.Move(st.id, when) // earlier: the structure must know now
		}
		k.state[key] = keyState{st.id, when}
	} else {
		if k.limit > 0 && len(k.state) >= k.limit {
			k.mu.Unlock()
			return ErrTooManyPending
		}
		id := k.ids.alloc()
		k.state[key] = keyState{id, when}
		k.q.Add(id, when, key)
	}
	wake := k.armed(when)
	k.mu.Unlock()
	if wake {
		k.wakeUp()
	}
	return nil
}

// forget drops key, whose id is id, from the tables. k.mu is held.
func (k *Keyed[K]) forget(key K, id int32) {
	delete(k.state, key)
	k.ids.release(id)
}

// Remove cancels key's pending timeout and reports whether this call
// prevented its expiry.
func (k *Keyed[K]) Remove(key K) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.state[key]
	if !ok {
		return false
	}
	k.q.Remove(st.id)
	k.forget(key, st.id)
	return true
}

// Deadline reports when key's pending timeout is due, and false if key has
// none.
func (k *Keyed[K]) Deadline(key K) (time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.state[key]
	if !ok {
		return time.Time{}, false
	}
	return k.timeOf(st.when), true
}

// Len reports the number of keys with a pending timeout.
func (k *Keyed[K]) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.state)
}

// Stop cancels every pending timeout and returns their keys, then waits
// for the driver goroutine to exit: once Stop returns, expire is not
// called again and Len is 0. Calls of expire already handed to the
// executor are not waited for. Set afterwards returns [ErrStopped]; a
// second Stop returns nil. Called from expire on the driver goroutine
// (the [Inline] executor), Stop returns at once, with the keys that were
// due in the same batch but not yet handed over.
func (k *Keyed[K]) Stop() []K {
	self := goid()
	k.mu.Lock()
	if k.stopped || k.q == nil {
		k.stopped = true
		k.mu.Unlock()
		k.wait(self)
		return nil
	}
	var out []K
	if k.started && k.isDriver(self) {
		out = append(out, k.batch[k.next:]...)
		clear(k.batch[k.next:])
		k.batch = k.batch[:k.next]
	}
	k.q.Drain(func(id int32, key K) {
		out = append(out, key)
		k.forget(key, id)
	})
	k.driver.stop()
	k.mu.Unlock()
	k.wait(self)
	return out
}

// Stats returns a snapshot of k, as [Timer.Stats] does for a Timer.
func (k *Keyed[K]) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := Stats{Structure: k.structure, Shards: 1, Pending: len(k.state), Wakeups: k.wakeups}
	if k.started && !k.stopped {
		s.Drivers = 1
	}
	return s
}

// expireID is the structure's fire callback in the driver: the deadline
// key id was filed at has come. If Set has since pushed the key's deadline
// back, the id is filed again at it (a deadline already reached goes to
// the structure's due list and fires on the driver's next pass, at once);
// otherwise the key expires. k.mu is held.
func (k *Keyed[K]) expireID(id int32, key K) {
	if st := k.state[key]; st.when > k.q.When(id) {
		k.q.Add(id, st.when, key)
		return
	}
	k.forget(key, id)
	k.batch = append(k.batch, key)
}

// pass implements worker.
func (k *Keyed[K]) pass(now uint64) (uint64, bool) {
	k.q.Advance(now, k.take)
	return k.q.Next()
}

func (k *Keyed[K]) busy() bool { return len(k.batch) > 0 }

// handOver implements worker: each due key goes to the executor.
func (k *Keyed[K]) handOver() {
	var zero K
	for k.next < len(k.batch) {
		key := k.batch[k.next]
		k.batch[k.next] = zero
		k.next++
		runWith(&k.runner, k.expire, key)
	}
	k.next = 0
	if cap(k.batch) > 1<<16 {
		k.batch = nil
	} else {
		k.batch = k.batch[:0]
	}
}
