package queue

import "fmt"

// staging is the part of Advance that every structure shares: entries that
// are due wait in the firing list until fire takes them, one at a time.
//
// Firing in two phases keeps the structures consistent while fire runs:
// first a structure moves everything due into the firing list without
// calling out, then staging hands the entries to fire. Whatever fire does in
// between is safe: Remove of an entry still in the firing list takes it out
// (it will not fire), and Add of an entry whose deadline has already been
// reached puts it in the due list, which the next Advance fires. So an
// Advance always ends, even when fire re-adds what it is given.
type staging[T any] struct {
	due    list[T] // added with a deadline at or before now
	firing list[T] // taken out of the structure, not yet handed to fire
	n      int     // entries in due and firing
	now    uint64  // the greatest now passed to Advance
	active bool    // inside Advance: fire must not call Advance
}

// addDue queues e, whose deadline has been reached, for the next Advance.
func (s *staging[T]) addDue(e *Entry[T]) {
	e.pos = posDue
	s.due.pushBack(e)
	s.n++
}

// stage moves e, taken out of its structure, to the firing list.
func (s *staging[T]) stage(e *Entry[T]) {
	e.pos = posFiring
	s.firing.pushBack(e)
	s.n++
}

// remove takes e out of the due or firing list, reporting whether it was in
// either.
func (s *staging[T]) remove(e *Entry[T]) bool {
	switch e.pos {
	case posDue:
		s.due.unlink(e)
	case posFiring:
		s.firing.unlink(e)
	default:
		return false
	}
	e.pos = 0
	s.n--
	return true
}

// begin starts an Advance to now: it moves the due list into the firing
// list, so entries added from here on wait for the next Advance. It returns
// the time the structure advances to.
func (s *staging[T]) begin(now uint64) uint64 {
	if s.active {
		panic("queue: Advance called from its own fire callback")
	}
	s.active = true
	s.now = max(s.now, now)
	for e := s.due.head; e != nil; e = e.next {
		e.pos = posFiring
	}
	s.firing.appendList(&s.due)
	return s.now
}

// fire hands the firing list to fire, in order, and ends the Advance.
func (s *staging[T]) fire(fire func(*Entry[T])) {
	defer func() { s.active = false }()
	for e := s.firing.head; e != nil; e = s.firing.head {
		s.firing.unlink(e)
		e.pos = 0
		s.n--
		fire(e)
	}
}

// pendingDue reports whether the due list holds work for the next Advance,
// or the firing list does because a fire callback panicked out of the last
// Advance, leaving the rest of its entries to the next.
func (s *staging[T]) pendingDue() bool {
	return s.due.head != nil || (!s.active && s.firing.head != nil)
}

// verify checks the due and firing lists: links both ways, markers, count.
func (s *staging[T]) verify() error {
	n := 0
	for _, l := range []struct {
		name string
		l    *list[T]
		pos  int32
	}{{"due", &s.due, posDue}, {"firing", &s.firing, posFiring}} {
		c, err := l.l.verify(func(e *Entry[T]) error {
			if e.pos != l.pos {
				return fmt.Errorf("%s entry records pos %d", l.name, e.pos)
			}
			return nil
		})
		if err != nil {
			return err
		}
		n += c
	}
	if n != s.n {
		return fmt.Errorf("due and firing lists hold %d entries, count says %d", n, s.n)
	}
	return nil
}

// verify checks that l is linked consistently both ways, calls check on
// each entry, and returns the number of entries.
func (l *list[T]) verify(check func(*Entry[T]) error) (int, error) {
	n := 0
	var prev *Entry[T]
	for e := l.head; e != nil; e = e.next {
		if e.prev != prev {
			return n, fmt.Errorf("list: entry %d has a wrong prev link", n)
		}
		if err := check(e); err != nil {
			return n, err
		}
		prev = e
		n++
	}
	if l.tail != prev {
		return n, fmt.Errorf("list: tail is not the last entry")
	}
	return n, nil
}
