package queue

// Entry is one deadline in a [Queue]. It is intrusive: the caller owns the
// Entry (usually as a field of its own struct) and the queue links it in
// place, so adding and removing allocate nothing.
//
// The zero Entry is ready to use and not queued. An Entry may be in at most
// one queue at a time; once removed or fired it may be added again, to the
// same queue or another. Value is the caller's and is never read by a queue.
//
// Entry is not safe for concurrent use: it belongs to the goroutine that
// drives its queue.
type Entry[T any] struct {
	// Value is the caller's payload, typically a pointer back to the struct
	// that holds the Entry.
	Value T

	when       uint64
	next, prev *Entry[T]

	// pos is 0 when the entry is not queued. Otherwise it records where the
	// entry lives so removal needs no search: heap index+1, wheel slot+1, or
	// one of the markers below.
	pos int32
}

const (
	posListed = 1  // in a SortedList
	posDue    = -1 // in the due list: deadline already reached when added
	posFiring = -2 // in the firing list: due, about to be handed to fire
)

// When reports the deadline the entry was last added with, in the queue's
// time unit (nanoseconds on the caller's clock). It stays readable after the
// entry fires or is removed.
func (e *Entry[T]) When() uint64 { return e.when }

// Queued reports whether the entry is currently in a queue.
func (e *Entry[T]) Queued() bool { return e.pos != 0 }

// list is a doubly linked list of entries threaded through next and prev:
// the bucket of both wheels, the due and firing lists, and the whole of the
// sorted list. pushBack and unlink are O(1); entries keep their order.
type list[T any] struct {
	head, tail *Entry[T]
}

// pushBack appends e to l.
func (l *list[T]) pushBack(e *Entry[T]) {
	e.next = nil
	e.prev = l.tail
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

// insertAfter links e into l after at, or at the front when at is nil.
func (l *list[T]) insertAfter(e, at *Entry[T]) {
	if at == nil {
		e.prev = nil
		e.next = l.head
		if l.head != nil {
			l.head.prev = e
		} else {
			l.tail = e
		}
		l.head = e
		return
	}
	e.prev = at
	e.next = at.next
	if at.next != nil {
		at.next.prev = e
	} else {
		l.tail = e
	}
	at.next = e
}

// unlink removes e, which must be in l.
func (l *list[T]) unlink(e *Entry[T]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.next, e.prev = nil, nil
}

// take empties l and returns its former head; the entries stay linked
// through next so the caller can walk them.
func (l *list[T]) take() *Entry[T] {
	h := l.head
	l.head, l.tail = nil, nil
	return h
}

// appendList moves every entry of o to the end of l, leaving o empty.
func (l *list[T]) appendList(o *list[T]) {
	if o.head == nil {
		return
	}
	if l.tail == nil {
		l.head = o.head
	} else {
		l.tail.next = o.head
		o.head.prev = l.tail
	}
	l.tail = o.tail
	o.head, o.tail = nil, nil
}
