// Package queue holds the four deadline structures behind hourglass's
// Timer, as plain data structures for programs that drive time themselves
// (an event loop, a simulation, a test): no locks, no goroutines, no clock.
// The caller passes now to Advance and receives every entry that is due.
//
// One contract (structure.go) is implemented by four structures, each
// explained in its file with a worked example: the hierarchical wheel
// (wheel.go), the hashed wheel with rounds (hashedwheel.go), the 4-ary
// heap (heap.go) and the sorted list (sortedlist.go). They link entries
// by int32 index in a node table (queue.go), never by pointer, so the
// garbage collector has no chains to follow. Two types run any of them,
// chosen with a [Structure]: [Queue] names entries by ids it hands out,
// and [KeyQueue] by key, through a hash table (keytable.go) whose records
// are the entries. Time is a uint64 count of nanoseconds on the caller's
// clock.
//
// Costs, for n queued entries and k entries due at an Advance:
//
//	structure           Add        Remove     Advance                 Next
//	HierarchicalWheel   O(1)       O(1)       O(L + k·L), L levels    O(L + 16)
//	HashedWheel         O(1)       O(1)       O(ticks + n/slots)      O(slots/64)
//	Heap (4-ary)        O(log n)   O(log n)   O(k log n)              O(1)
//	SortedList          O(n)       O(1)       O(k)                    O(1)
//
// A [KeyQueue] adds a hash probe, O(1) expected, to each operation by key.
//
// This corrects the usual textbook table in three places. The hierarchical
// wheel's add is O(1), not O(levels): the level is the highest digit (10
// bits for level 0, 6 above) in which the deadline's tick differs from
// the current tick, one XOR and one count of leading zeros. Its real
// per-level cost is at expiry, where an entry is re-filed once for each
// level it descends (k·L above; in practice none for a deadline within
// the current block of 1,024 ticks, one or two beyond). The hashed
// wheel's expiry cost is not O(1) per tick: each slot visit walks every
// entry in the slot, including those that are whole turns away, n/slots
// of them on average. And the sorted list's add is O(1) when deadlines
// arrive in order, the common case of one fixed timeout for every
// request, which is why it stays a fair baseline.
//
// The hierarchical wheel also moves a deadline later in O(1) without
// relinking: the entry is filed again when its old slot comes due.
package queue
