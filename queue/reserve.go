package queue

// This file is the Queue's second way in: reserve an entry now, file it
// into the structure later, so that one removed in between never touches
// the structure.

import "math"

// A reserved entry has an id, a deadline and a value, and counts as
// queued (Queued, Lookup, RemoveIf and Move see it), but sits in no list
// of the structure: its node's next is reservedLink and its prev its
// place in Queue.reserved plus one. RemoveIf of a reserved entry is a
// store into Queue.reserved and the free stack's push; the structure's
// add and remove (for the hierarchical wheel the tick, the level, the
// slot's occupancy bit and the links of the slot's last node, twice) are
// never paid. That is the common case of a timeout per request, each
// scheduled and cancelled in one hourglass Batch, whose shard's driver is
// then not woken either for a deadline cancelled before the batch ended
// (BenchmarkBatch_AfterFuncCancel_SameBatch under callgrind), or armed
// and cancelled by hourglass's Timer.Arm and Timer.Cancel before the
// shard's driver next passes (BenchmarkPair_Netty). A timeout
// that stays pending pays a little more, for the list of reserved ids
// and the filing pass (docs/results/2026-11-27-schedule-cancel.md has
// both).

// reservedLink is the next link of a reserved node: not 0, so the node
// counts as queued, and no list's reference, which are -(id+1) for small
// ids.
const reservedLink = math.MinInt32

// maxReserved bounds the entries reserved and not yet filed: Reserve
// files them all when this many wait, so that a caller reserving millions
// before filing keeps 4 KiB of ids, not megabytes.
const maxReserved = 1024

// Reserve makes a new entry with value v due at when and returns its id,
// as [Queue.Add] does, but leaves it out of the structure until
// [Queue.FileReserved] files it. Until then it is queued for Queued,
// Lookup, When, Value, RemoveIf and Move, whose costs are O(1) for it;
// Len, Next, Advance and Drain file every reserved entry first. It is
// O(1), and allocates only to grow the table, or the list of reserved
// ids up to its bound (when this many wait, Reserve files them all).
func (q *Queue[V]) Reserve(when uint64, v V) int32 {
	if len(q.reserved) == maxReserved {
		q.fileReserved()
	}
	i := q.take()
	n := q.node(i)
	n.when, n.value = when, v
	q.reserved = append(q.reserved, i)
	n.next, n.prev = reservedLink, int32(len(q.reserved))
	return i
}

// FileReserved files every reserved entry still queued into the structure,
// in the order they were reserved, and returns the earliest deadline
// among them and among those filed by Reserve, Len, Next or Drain since
// the last call or the last Advance, whichever came later;
// math.MaxUint64 if there were none. (What Advance files, its caller
// learns from Next.) It is O(k) for k entries reserved, times the
// structure's Add.
func (q *Queue[V]) FileReserved() (earliest uint64) {
	q.fileReserved()
	earliest, q.filedMin = q.filedMin, math.MaxUint64
	return earliest
}

// fileReserved files the reserved entries, keeping the earliest deadline
// in q.filedMin.
func (q *Queue[V]) fileReserved() {
	for _, i := range q.reserved {
		if i < 0 { // removed while reserved
			continue
		}
		n := q.node(i)
		n.next, n.prev = 0, 0
		q.filedMin = min(q.filedMin, n.when)
		if q.wheel != nil {
			q.wheel.add(i, n)
		} else {
			q.s.add(i, n)
		}
	}
	q.reserved = q.reserved[:0]
}

// fileFirst files the reserved entries, if any, before a call that reads
// the structure whole.
func (q *Queue[V]) fileFirst() {
	if len(q.reserved) > 0 {
		q.fileReserved()
	}
}

// Reserved reports how many entries reserved since the last filing
// are still queued and wait to be filed. It is O(k) for the k entries
// reserved since, those removed included (at most 1,024).
func (q *Queue[V]) Reserved() int {
	n := 0
	for _, i := range q.reserved {
		if i >= 0 {
			n++
		}
	}
	return n
}

// unreserve takes reserved node n out of q.reserved, leaving both its
// links 0 for freeNode.
func (q *Queue[V]) unreserve(n *node[V]) {
	q.reserved[n.prev-1] = -1
	n.next, n.prev = 0, 0
}
