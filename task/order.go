package task

// Delivery order is the order in which a queue hands out its ready
// tasks, and the one rule both engines follow for it (the embedded one
// in its ready heaps, a cluster node in its SQL, cluster.sqlDeliveryOrder):
// ascending priority (lower first, beanstalkd's), then ascending due time
// (the time the task became due: its put, or the end of its delay), then
// ascending job id, which is put order. A task's key, and a queue's
// per-key turns, interleave keys on top of this order; within a key it
// holds.
//
// For example, with a task a of priority 1024 due at 10 s (job 7), b of
// priority 0 due at 20 s (job 9), c of priority 1024 due at 10 s (job
// 3) and d of priority 1024 due at 5 s (job 8), a reserve of four hands
// out b (the lowest priority), d (due first among 1024), c, then a (due
// together: job 3 was put first).
//
// Due order, the order of a queue's listings (FindTasks), is the same
// without the priority: [CompareDue].

// DeliveredBefore reports whether a ready task of priority aPrio, due at
// aDue (Unix ns) with job id aJob, is handed out before one of bPrio,
// bDue and bJob: the delivery order above. It is O(1) and small enough
// for the compiler to inline into the heaps that call it.
func DeliveredBefore(aPrio uint32, aDue int64, aJob uint64, bPrio uint32, bDue int64, bJob uint64) bool {
	if aPrio != bPrio {
		return aPrio < bPrio
	}
	if aDue != bDue {
		return aDue < bDue
	}
	return aJob < bJob
}

// CompareDue compares two tasks in due order, by due time (Unix ns) and
// then job id: -1 if the first comes first, +1 if the second does, 0 for
// the same task. O(1).
func CompareDue(aDue int64, aJob uint64, bDue int64, bJob uint64) int {
	switch {
	case aDue < bDue:
		return -1
	case aDue > bDue:
		return 1
	case aJob < bJob:
		return -1
	case aJob > bJob:
		return 1
	}
	return 0
}
