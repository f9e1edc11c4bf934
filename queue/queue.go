package queue

// Queue is a set of deadlines driven by its caller. Implementations never
// read the clock, start goroutines or lock: time is the now passed to
// [Queue.Advance], an unsigned count of nanoseconds on a clock of the
// caller's choosing (a monotonic offset from a start instant, typically).
// Unsigned time lets now + any non-negative time.Duration be stored without
// overflow for the next 292 years of uptime.
//
// A Queue is not safe for concurrent use. The concurrent timer in the parent
// package guards each one with a mutex.
type Queue[T any] interface {
	// Add queues e to fire at when. An entry that is already due (for a
	// wheel: whose tick has been reached) fires on the next Advance. Add
	// panics if e is already queued.
	Add(e *Entry[T], when uint64)

	// Remove takes e out of the queue and reports whether it was queued.
	// e must not be queued in a different queue.
	Remove(e *Entry[T]) bool

	// Advance moves the queue's time to now and hands every entry that is
	// due to fire, removed from the queue, before fire is called. fire may
	// call Add and Remove; an entry it adds that is already due fires on
	// the next Advance, not this one. A now earlier than an earlier
	// Advance's is treated as that earlier time.
	Advance(now uint64, fire func(*Entry[T]))

	// Next reports the earliest time at which Advance has work to do, and
	// false if the queue is empty. For the wheels that is a tick boundary,
	// and for the hierarchical wheel it may be a cascade that fires nothing
	// yet; for the heap and the list it is the earliest deadline. A driver
	// sleeps until Next and then calls Advance.
	Next() (uint64, bool)

	// Len reports the number of queued entries.
	Len() int
}

// Compile-time checks that every structure is a Queue.
var (
	_ Queue[int] = (*HashedWheel[int])(nil)
	_ Queue[int] = (*HierarchicalWheel[int])(nil)
	_ Queue[int] = (*Heap[int])(nil)
	_ Queue[int] = (*SortedList[int])(nil)
)

// ceilTicks returns when rounded up to a whole number of ticks: the first
// tick at whose start when has been reached. Rounding up is what makes a
// wheel never fire early.
func ceilTicks(when, tick uint64) uint64 {
	t := when / tick
	if when%tick != 0 {
		t++
	}
	return t
}
