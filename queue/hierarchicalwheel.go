package queue

import (
	"fmt"
	"time"
)

// HierarchicalWheel is a hierarchical timing wheel in the manner of Kafka's
// TimingWheel, laid out as tokio's and Linux's are: a stack of levels of 64
// slots, each level's slot covering 64 of the slots below, and a bitmap per
// level of the slots that hold anything, so finding the next slot to visit
// is a few bit operations and no empty tick is ever processed.
//
// Time is counted in ticks. An entry due at tick t (its deadline rounded up
// to a tick) is kept at the lowest level whose slot can tell it apart from
// the current tick e: the level of the highest 6-bit digit in which t and e
// differ, in the slot named by t's digit at that level. With a 1 ms tick:
//
//	level 0: 64 slots of 1 ms       covers 64 ms
//	level 1: 64 slots of 64 ms      covers 4.1 s
//	level 2: 64 slots of 4.1 s      covers 4.4 min
//	level 3: 64 slots of 4.4 min    covers 4.7 h
//	level 4: 64 slots of 4.7 h      covers 12.4 days
//	level 5: 64 slots of 12.4 days  covers 2.2 years
//	level 6 and 7 cover the rest of the uint64 nanosecond range
//
// When time reaches the start of a slot above level 0, the slot's entries
// cascade: each is filed again against the new current tick and lands on a
// lower level (or fires, if its tick is that start). A level-0 slot's
// entries all fire when time reaches it. Everything at a lower level is due
// before anything at a higher one, so the next slot to visit is the first
// occupied slot after the current one on the lowest non-empty level.
//
// Worked example, 1 ms tick, current tick 100 (digits 1|36): an entry due
// at tick 130 (digits 2|2) differs in digit 1, so it goes to level 1 slot 2,
// which starts at tick 2·64 = 128. Next reports 128; Advance to 128 cascades
// the slot, and against current tick 128 (digits 2|0) the entry now differs
// only in digit 0, so it moves to level 0 slot 2 and fires at tick 130.
//
// Costs, for n queued entries and L levels (8 for a 1 ms tick, 10 for
// 1 µs): Add O(1), Remove O(1), Next O(L), Advance O(L + k·L) for k entries
// due, since an entry cascades at most once per level (in practice one or
// two times). Deadlines up to math.MaxUint64 nanoseconds are held exactly,
// with no clamp. Entries fire at the first tick boundary at or after their
// deadline: never early, and at most one tick late.
//
// HierarchicalWheel is not safe for concurrent use.
type HierarchicalWheel[T any] struct {
	staging[T]
	levels
	slots [][levelSize]list[T] // per level
	len   int                  // entries in slots
}

// NewHierarchicalWheel returns an empty wheel with the given tick, and as
// many levels as it takes to cover every uint64 deadline. It panics if tick
// is not positive: a parent package validates user input and returns an
// error instead.
func NewHierarchicalWheel[T any](tick time.Duration) *HierarchicalWheel[T] {
	if tick <= 0 {
		panic("queue: NewHierarchicalWheel with non-positive tick")
	}
	w := &HierarchicalWheel[T]{levels: newLevels(uint64(tick))}
	w.slots = make([][levelSize]list[T], len(w.occupied))
	return w
}

// Len reports the number of queued entries. It is O(1).
func (w *HierarchicalWheel[T]) Len() int { return w.len + w.n }

// Levels reports the number of levels.
func (w *HierarchicalWheel[T]) Levels() int { return len(w.occupied) }

// Add queues e to fire at when. It is O(1) and allocates nothing. It panics
// if e is already queued.
func (w *HierarchicalWheel[T]) Add(e *Entry[T], when uint64) {
	if e.pos != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	e.when = when
	t := ceilTicks(when, w.tick)
	if t <= w.elapsed {
		w.addDue(e)
		return
	}
	w.insert(e, t)
}

// insert files e, due at tick t > w.elapsed, in its level and slot.
func (w *HierarchicalWheel[T]) insert(e *Entry[T], t uint64) {
	l, s := w.place(t)
	w.slots[l][s].pushBack(e)
	w.occupy(l, s)
	e.pos = int32(l*levelSize + int(s) + 1)
	w.len++
}

// Remove takes e out of the wheel and reports whether it was queued. It is
// O(1).
func (w *HierarchicalWheel[T]) Remove(e *Entry[T]) bool {
	if e.pos <= 0 {
		return w.remove(e)
	}
	p := int(e.pos - 1)
	l, s := p/levelSize, uint64(p%levelSize)
	w.slots[l][s].unlink(e)
	if w.slots[l][s].head == nil {
		w.vacate(l, s)
	}
	e.pos = 0
	w.len--
	return true
}

// Next reports the start of the next occupied slot: the deadline of the
// earliest entry rounded up to a tick if it is on level 0, otherwise the
// time of the next cascade. It is O(L) and allocates nothing.
func (w *HierarchicalWheel[T]) Next() (uint64, bool) {
	if w.pendingDue() {
		return w.now, true
	}
	_, _, start, ok := w.next()
	if !ok {
		return 0, false
	}
	return w.time(start), true
}

// Advance moves time to now, cascading and firing every slot whose start
// has been reached, in deadline order up to one tick. Empty slots cost
// nothing. Advance to math.MaxUint64 fires everything.
func (w *HierarchicalWheel[T]) Advance(now uint64, fire func(*Entry[T])) {
	target := w.target(w.begin(now))
	for w.len > 0 {
		l, s, start, _ := w.next()
		if start > target {
			break
		}
		w.elapsed = start
		w.vacate(l, s)
		for e := w.slots[l][s].take(); e != nil; {
			next := e.next
			w.len--
			t := ceilTicks(e.when, w.tick)
			if t <= start {
				w.stage(e)
			} else {
				w.insert(e, t)
			}
			e = next
		}
	}
	w.elapsed = max(w.elapsed, target)
	w.fire(fire)
}

// verify checks every level: links, recorded positions, the occupancy
// bitmap, and the invariant the wheel relies on, that each entry sits on
// the level of the highest digit in which its tick differs from the current
// tick, in the slot of its digit there, which is after the current slot.
func (w *HierarchicalWheel[T]) verify() error {
	if err := w.staging.verify(); err != nil {
		return fmt.Errorf("hierarchical wheel: %w", err)
	}
	total := 0
	for l := range w.slots {
		shift := uint(l * levelBits)
		for s := range w.slots[l] {
			n, err := w.slots[l][s].verify(func(e *Entry[T]) error {
				if e.pos != int32(l*levelSize+s+1) {
					return fmt.Errorf("entry at level %d slot %d records pos %d", l, s, e.pos)
				}
				if w.active {
					return nil
				}
				t := ceilTicks(e.when, w.tick)
				if t <= w.elapsed {
					return fmt.Errorf("entry due at tick %d still queued at tick %d", t, w.elapsed)
				}
				if got, _ := w.place(t); got != l {
					return fmt.Errorf("entry due at tick %d on level %d, belongs on %d (tick %d)", t, l, got, w.elapsed)
				}
				if d := (t >> shift) & levelMask; d != uint64(s) {
					return fmt.Errorf("entry due at tick %d in slot %d, belongs in %d", t, s, d)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("hierarchical wheel: %w", err)
			}
			if (n > 0) != (w.occupied[l]&(1<<s) != 0) {
				return fmt.Errorf("hierarchical wheel: level %d slot %d holds %d entries, bitmap says %v", l, s, n, n == 0)
			}
			if n > 0 && !w.filedAfterCurrent(l, uint64(s)) {
				return fmt.Errorf("hierarchical wheel: level %d slot %d occupied at or before current slot", l, s)
			}
			total += n
		}
	}
	if total != w.len {
		return fmt.Errorf("hierarchical wheel: levels hold %d entries, count says %d", total, w.len)
	}
	return nil
}
