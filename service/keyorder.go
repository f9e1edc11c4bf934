package service

// KeyCompare orders the keys of a queue in its round across keys (issue
// 41): by name, byte by byte, and the key "" after every other key. It
// returns -1 when a comes before b, 0 when they are equal, +1 after.
// O(len) and safe for concurrent use.
//
// This is the one rule both engines follow in a reserve of a queue that
// uses keys (the embedded engine's lanes and takeLocked, broker/fair.go
// and broker/reserve.go; a cluster node's sqlReserveFair,
// cluster/reserve.go, and, for a queue with a rate, a concurrency or a
// per-key limit, sqlReserveLimited, cluster/limits.go):
//
//   - A queue keeps a cursor: the last key served ("" before the first
//     reserve, so that the first round starts at the first key by name).
//     A queue that drains keeps it for a minute: the embedded engine
//     forgets it then (and when it restarts), a cluster drops its row a
//     round after the turn rows of the queue's keys, which live a minute
//     or more unwritten.
//   - The keys of a round are those whose first ready task (in delivery
//     order: priority, due time, job id) has the queue's first priority;
//     a key whose first task has a lower priority waits for a round in
//     which its priority is the first. A key with no ready task is in no
//     round and costs nothing; when it has one again it comes at its
//     place by name, wherever the cursor is (it keeps no turn). A queue
//     whose ready tasks all have the key "" has no round: its tasks go
//     in delivery order.
//   - A reserve serves those keys once each, one task each (the key's
//     first), in the order of KeyCompare starting after the cursor and
//     wrapping round (KeyAfter), and moves the cursor to the last key it
//     served. Then, only if it asked for more tasks than that, it takes
//     the rest in delivery order across the queue's keys (the fill),
//     which leaves the cursor where it is.
//   - Over several queues, a reserve takes the rounds' tasks first, by
//     priority, then place in their queue's round (first, second, ...),
//     then due time and job id; then the fills' tasks in delivery order
//     across the queues. Each queue's cursor moves to the last key of its
//     own round that the reserve took.
//   - The answer lists the tasks in delivery order, whatever the order
//     they were taken in.
//
// Under a limit (a queue's rate or concurrency, a per-key concurrency
// or rate) both engines leave a key its limit holds back out of the
// round, and a queue's first priority is that of the keys its limits
// let through. A cluster's flush that hands several tasks falling due
// at once to a waiting reserver takes them by this rule too, over the
// tasks it makes ready (cluster/flush.go, hand).
//
// Example: keys put as c, "", a, b, three tasks each (c1, c2, c3, then
// "" 1 to 3, a's, b's), all of one priority. Reserves of one serve a1,
// b1, c1, ""1, a2, b2, ... A reserve of 6 at the start serves the round
// a1, b1, c1, ""1 (the cursor moves to "") and the fill c2, c3 (the
// first in delivery order of what is left: put first); the next reserve
// of one serves a2. If b's tasks are all taken while the cursor is at a
// and b puts one again, b is served next: its place is by name.
func KeyCompare(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	case a < b:
		return -1
	default:
		return 1
	}
}

// KeyLess reports whether a comes before b in a round:
// KeyCompare(a, b) < 0, in one comparison of the bytes. O(len) and safe
// for concurrent use.
func KeyLess(a, b string) bool {
	return a != "" && (b == "" || a < b)
}

// KeyAfter reports whether key comes after the cursor within the round
// that the cursor is in: KeyCompare(key, cursor) > 0. A key for which it
// is false comes in the next round, after the keys for which it is true
// (KeyCompare). O(len) and safe for concurrent use.
func KeyAfter(key, cursor string) bool {
	return KeyLess(cursor, key)
}
