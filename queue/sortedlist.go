package queue

import "fmt"

// SortedList is a doubly linked list of entries kept in deadline order: the
// textbook baseline every timer structure is measured against.
//
// Costs, for n queued entries: Add O(n), Remove O(1), Next O(1), and
// Advance O(k) for k entries due. Add searches from the latest deadline
// backwards, so deadlines that arrive in increasing order (one fixed delay
// for every timeout, say) are O(1); random deadlines are O(n), which is why
// the list is only usable for small n. Entries with equal deadlines fire in
// the order they were added. Deadlines are exact.
//
// The zero SortedList is empty and ready to use. SortedList is not safe for
// concurrent use.
type SortedList[T any] struct {
	staging[T]
	l   list[T]
	len int
}

// NewSortedList returns an empty list.
func NewSortedList[T any]() *SortedList[T] { return &SortedList[T]{} }

// Len reports the number of queued entries. It is O(1).
func (s *SortedList[T]) Len() int { return s.len + s.n }

// Add queues e to fire at when. It is O(n) in general and O(1) when when is
// at or after every queued deadline. It panics if e is already queued.
func (s *SortedList[T]) Add(e *Entry[T], when uint64) {
	if e.pos != 0 {
		panic("queue: Add of an entry that is already queued")
	}
	e.when = when
	if when <= s.now {
		s.addDue(e)
		return
	}
	at := s.l.tail
	for at != nil && at.when > when {
		at = at.prev
	}
	s.l.insertAfter(e, at)
	e.pos = posListed
	s.len++
}

// Remove takes e out of the list and reports whether it was queued. It is
// O(1).
func (s *SortedList[T]) Remove(e *Entry[T]) bool {
	if e.pos != posListed {
		return s.remove(e)
	}
	s.l.unlink(e)
	e.pos = 0
	s.len--
	return true
}

// Next reports the earliest deadline. It is O(1).
func (s *SortedList[T]) Next() (uint64, bool) {
	if s.pendingDue() {
		return s.now, true
	}
	if s.l.head == nil {
		return 0, false
	}
	return s.l.head.when, true
}

// Advance fires every entry whose deadline is at or before now, in deadline
// order after those added already due. It is O(k) for k entries fired.
func (s *SortedList[T]) Advance(now uint64, fire func(*Entry[T])) {
	now = s.begin(now)
	for e := s.l.head; e != nil && e.when <= now; e = s.l.head {
		s.l.unlink(e)
		s.len--
		s.stage(e)
	}
	s.fire(fire)
}

// verify checks that the list is linked both ways, ordered, counted, and
// holds nothing due at the structure's time.
func (s *SortedList[T]) verify() error {
	if err := s.staging.verify(); err != nil {
		return fmt.Errorf("sorted list: %w", err)
	}
	var last uint64
	n, err := s.l.verify(func(e *Entry[T]) error {
		if e.pos != posListed {
			return fmt.Errorf("entry records pos %d", e.pos)
		}
		if e.when < last {
			return fmt.Errorf("deadline %d after %d", e.when, last)
		}
		if e.when <= s.now && !s.active {
			return fmt.Errorf("entry due at %d but time is %d", e.when, s.now)
		}
		last = e.when
		return nil
	})
	if err != nil {
		return fmt.Errorf("sorted list: %w", err)
	}
	if n != s.len {
		return fmt.Errorf("sorted list: holds %d entries, count says %d", n, s.len)
	}
	return nil
}
