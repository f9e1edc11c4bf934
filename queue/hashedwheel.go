package queue

import (
	"fmt"
	"math"
	"time"
)

// HashedWheel is Netty's HashedWheelTimer as a data structure: a ring of
// power-of-two many slots, each a list of entries, and a cursor that moves
// one slot per tick. An entry due at tick t (its deadline rounded up to a
// tick) hangs in slot t mod slots. When the cursor reaches a slot it fires
// the entries whose tick has come and leaves the rest, which are one or more
// whole turns ("rounds") away. Netty stores the rounds; here they follow
// from the deadline, so an entry needs no extra field.
//
// Worked example, with 8 slots of 1 s and the cursor at tick 0: a deadline
// 3 s away goes to slot 3 and fires when the cursor gets there; one 10 s
// away goes to slot 10 mod 8 = 2 and is skipped when the cursor passes slot
// 2 at tick 2, because it is one round away, and fires at tick 10.
//
// Costs, for n queued entries and s slots: Add O(1), Remove O(1), Next
// O(1). Advance visits each tick's slot, at most s of them however far time
// moves, and every entry in a visited slot, due or not: O(ticks + n/s) per
// call with deadlines spread evenly. That scan of entries that are rounds
// away is the cost the hierarchical wheel removes. Next is always the next
// tick while anything is queued, so a driver of a non-empty HashedWheel
// wakes every tick, as Netty's worker does; an empty one never wakes.
//
// Entries fire at the first tick boundary at or after their deadline: never
// early, and at most one tick late.
//
// HashedWheel is not safe for concurrent use.
type HashedWheel[T any] struct {
	staging[T]
	tick  uint64
	mask  uint64
	slots []list[T]
	cur   uint64 // ticks done: every entry due at a tick ≤ cur has fired
	len   int    // entries in slots
}

// NewHashedWheel returns an empty wheel of the given tick with slots rounded
// up to a power of two. It panics if tick or slots is not positive or if
// slots is over 2^30: a parent package validates user input and returns an
// error instead.
func NewHashedWheel[T any](tick time.Duration, slots int) *HashedWheel[T] {
	if tick <= 0 {
		panic("queue: NewHashedWheel with non-positive tick")
	}
	if slots <= 0 || slots > 1<<30 {
		panic("queue: NewHashedWheel with slots outside 1 to 2^30")
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	return &HashedWheel[T]{tick: uint64(tick), mask: uint64(n - 1), slots: make([]list[T], n)}
}

// Len reports the number of queued entries. It is O(1).
func (w *HashedWheel[T]) Len() int { return w.len + w.n }

// Slots reports the number of slots, a power of two.
func (w *HashedWheel[T]) Slots() int { return len(w.slots) }

// Add queues e to fire at when. It is O(1) and allocates nothing. It panics
// if e is already queued.
func (w *HashedWheel[T]) Add(e *Entry[T], when uint64) {
	if e.pos != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	e.when = when
	t := ceilTicks(when, w.tick)
	if t <= w.cur {
		w.addDue(e)
		return
	}
	s := t & w.mask
	w.slots[s].pushBack(e)
	e.pos = int32(s + 1)
	w.len++
}

// Remove takes e out of the wheel and reports whether it was queued. It is
// O(1).
func (w *HashedWheel[T]) Remove(e *Entry[T]) bool {
	if e.pos <= 0 {
		return w.remove(e)
	}
	w.slots[e.pos-1].unlink(e)
	e.pos = 0
	w.len--
	return true
}

// Next reports the next tick boundary while the wheel holds entries: the
// hashed wheel does not know which slot is next without scanning. It is
// O(1).
func (w *HashedWheel[T]) Next() (uint64, bool) {
	switch {
	case w.pendingDue():
		return w.now, true
	case w.len == 0:
		return 0, false
	case w.cur >= math.MaxUint64/w.tick:
		return math.MaxUint64, true
	}
	return (w.cur + 1) * w.tick, true
}

// Advance moves the cursor to now, visiting at most one turn of slots, and
// fires every entry whose tick has come, in slot order. Advance to
// math.MaxUint64 fires everything.
func (w *HashedWheel[T]) Advance(now uint64, fire func(*Entry[T])) {
	now = w.begin(now)
	target := now / w.tick
	limit := target * w.tick // entries due at or before limit have their tick
	if now == math.MaxUint64 {
		target, limit = math.MaxUint64, math.MaxUint64
	}
	if target > w.cur && w.len > 0 {
		steps := min(target-w.cur, uint64(len(w.slots)))
		for i := uint64(1); i <= steps; i++ {
			l := &w.slots[(w.cur+i)&w.mask]
			for e := l.head; e != nil; {
				next := e.next
				if e.when <= limit {
					l.unlink(e)
					w.len--
					w.stage(e)
				}
				e = next
			}
		}
	}
	w.cur = max(w.cur, target)
	w.fire(fire)
}

// verify checks every slot: links, recorded positions, each entry in the
// slot of its tick and not yet due.
func (w *HashedWheel[T]) verify() error {
	if err := w.staging.verify(); err != nil {
		return fmt.Errorf("hashed wheel: %w", err)
	}
	total := 0
	for i := range w.slots {
		n, err := w.slots[i].verify(func(e *Entry[T]) error {
			if e.pos != int32(i+1) {
				return fmt.Errorf("entry in slot %d records pos %d", i, e.pos)
			}
			t := ceilTicks(e.when, w.tick)
			if t&w.mask != uint64(i) {
				return fmt.Errorf("entry due at tick %d in slot %d", t, i)
			}
			if t <= w.cur && !w.active {
				return fmt.Errorf("entry due at tick %d still queued at tick %d", t, w.cur)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("hashed wheel: %w", err)
		}
		total += n
	}
	if total != w.len {
		return fmt.Errorf("hashed wheel: slots hold %d entries, count says %d", total, w.len)
	}
	return nil
}
