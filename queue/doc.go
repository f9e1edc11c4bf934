// Package queue holds the four deadline structures behind hourglass's
// Timer, as plain data structures for programs that drive time themselves
// (an event loop, a simulation, a test): no locks, no goroutines, no clock.
// The caller passes now to Advance and receives every entry that is due.
//
// Entries are intrusive ([Entry] lives inside the caller's own struct), so
// adding and removing allocate nothing. Time is a uint64 count of
// nanoseconds on the caller's clock.
//
// Costs, for n queued entries and k entries due at an Advance:
//
//	structure           Add        Remove     Advance                 Next
//	HierarchicalWheel   O(1)       O(1)       O(L + k·L), L levels    O(L)
//	IndexWheel          O(1)       O(1)       O(L + k·L)              O(L)
//	KeyWheel            O(1)*      O(1)*      O(L + k·L)              O(L)
//	HashedWheel         O(1)       O(1)       O(ticks + n/slots)      O(slots/64)
//	Heap (4-ary)        O(log n)   O(log n)   O(k log n)              O(1)
//	SortedList          O(n)       O(1)       O(k)                    O(1)
//
// This corrects the usual textbook table in three places. The hierarchical
// wheel's add is O(1), not O(levels): the level is the highest 6-bit digit
// in which the deadline's tick differs from the current tick, one XOR and
// one count of leading zeros. Its real per-level cost is at expiry, where
// an entry is re-filed once for each level it descends (k·L above, one or
// two cascades in practice). The hashed wheel's expiry cost is not O(1) per
// tick: each slot visit walks every entry in the slot, including those that
// are whole turns away, n/slots of them on average. And the sorted list's
// add is O(1) when deadlines arrive in order, the common case of one fixed
// timeout for every request, which is why it stays a fair baseline.
//
// (* expected, over a hash table.)
//
// [IndexWheel] is the hierarchical wheel over integer indices instead of
// entries: pointer-free, so the garbage collector never scans it, and with
// an O(1) Move that pushes a deadline back without relinking. [KeyWheel]
// is the same wheel keyed by any comparable type, one deadline per key,
// its table doubling as the hash table that finds a key.
//
// Each structure's file explains its algorithm with a worked example:
// [HierarchicalWheel] for the levels and the cascade, [HashedWheel] for
// slots and rounds.
package queue
