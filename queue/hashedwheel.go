package queue

import (
	"fmt"
	"math"
	"math/bits"
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
// Costs, for n queued entries and s slots: Add O(1), Remove O(1). Advance
// looks at each tick's slot, at most s of them however far time moves, and
// walks every entry in an occupied one, due or not: O(ticks + n/s) per call
// with deadlines spread evenly. That walk over entries that are rounds away
// is the cost the hierarchical wheel removes. Next finds the next occupied
// slot in a bitmap of the slots, O(s/64); unlike Netty's worker, which
// wakes every tick, a driver can sleep until then. A slot whose entries are
// all rounds away still costs a wake-up each turn.
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
	occ   []uint64 // bit s set when slots[s] is not empty
	cur   uint64   // ticks done: every entry due at a tick ≤ cur has fired
	len   int      // entries in slots
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
	return &HashedWheel[T]{
		tick:  uint64(tick),
		mask:  uint64(n - 1),
		slots: make([]list[T], n),
		occ:   make([]uint64, (n+63)/64),
	}
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
	w.occ[s/64] |= 1 << (s % 64)
	e.pos = int32(s + 1)
	w.len++
}

// Remove takes e out of the wheel and reports whether it was queued. It is
// O(1).
func (w *HashedWheel[T]) Remove(e *Entry[T]) bool {
	if e.pos <= 0 {
		return w.remove(e)
	}
	s := uint64(e.pos - 1)
	w.slots[s].unlink(e)
	if w.slots[s].head == nil {
		w.occ[s/64] &^= 1 << (s % 64)
	}
	e.pos = 0
	w.len--
	return true
}

// Next reports the start of the tick of the next occupied slot: the
// earliest deadline rounded up to a tick, or an earlier tick whose slot
// holds only entries that are whole turns away. It is O(s/64).
func (w *HashedWheel[T]) Next() (uint64, bool) {
	if w.pendingDue() {
		return w.now, true
	}
	if w.len == 0 {
		return 0, false
	}
	ahead := w.nextOccupied()
	if w.cur > math.MaxUint64/w.tick-ahead {
		return math.MaxUint64, true
	}
	return (w.cur + ahead) * w.tick, true
}

// nextOccupied returns how many ticks after cur the cursor first reaches
// an occupied slot, between 1 and the number of slots. The wheel must not
// be empty.
func (w *HashedWheel[T]) nextOccupied() uint64 {
	n := uint64(len(w.slots))
	width := min(n, 64) // slots per bitmap word
	start := (w.cur + 1) & w.mask
	for off := uint64(0); off < n; {
		i := (start + off) & w.mask
		if word := w.occ[i/64] >> (i % 64); word != 0 {
			if d := off + uint64(bits.TrailingZeros64(word)); d < n {
				return d + 1
			}
		}
		off += width - i%64
	}
	panic("queue: HashedWheel bitmap out of step with its count")
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
			s := (w.cur + i) & w.mask
			if w.occ[s/64]&(1<<(s%64)) == 0 {
				continue
			}
			l := &w.slots[s]
			for e := l.head; e != nil; {
				next := e.next
				if e.when <= limit {
					l.unlink(e)
					w.len--
					w.stage(e)
				}
				e = next
			}
			if l.head == nil {
				w.occ[s/64] &^= 1 << (s % 64)
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
		if (n > 0) != (w.occ[i/64]&(1<<(i%64)) != 0) {
			return fmt.Errorf("hashed wheel: slot %d holds %d entries, bitmap disagrees", i, n)
		}
		total += n
	}
	if total != w.len {
		return fmt.Errorf("hashed wheel: slots hold %d entries, count says %d", total, w.len)
	}
	return nil
}
