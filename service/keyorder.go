package service

// KeyCompare orders the keys of a queue in its round across keys (issue
// 41): by name, byte by byte, and the key "" after every other key. It
// returns -1 when a comes before b, 0 when they are equal, +1 after.
// O(len) and safe for concurrent use.
//
// This is the one rule both engines follow in a reserve of a queue that
// uses keys (the embedded engine's lanes, broker/fair.go; a cluster
// node's sqlReserveFair and its flush's hand-over, cluster/reserve.go and
// cluster/flush.go):
//
//   - A queue keeps a cursor: the last key served ("" before the first
//     reserve, so that the first round starts at the first key by name).
//   - The keys of a round are those whose first ready task (in delivery
//     order: priority, due time, job id) has the queue's first priority;
//     a key whose first task has a lower priority waits for a round in
//     which its priority is the first. A key with no ready task is in no
//     round and costs nothing; when it has one again it comes at its
//     place by name, wherever the cursor is (it keeps no turn).
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
//   - A key that a per-key limit holds back (task.PerKey) is left out of
//     the round while it is held, and the cursor passes over it.
//
// Example: keys put as c, "", a, b, three tasks each, all of one
// priority. Reserves of one task serve a, b, c, "", a, b, c, "", ...;
// a reserve of 6 at the start serves a1, b1, c1, ""1 (the round; the
// cursor moves to "") and then a2, a3 (the fill, in delivery order:
// a's tasks were put first of those left... by job id), and the next
// reserve of one serves a's next task if a has one, else b's. If b's
// tasks are all taken while the cursor is at a, and b puts one again,
// b is served right after a: its place is by name.
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

// KeyAfter reports whether key comes after the cursor within the round
// that the cursor is in: KeyCompare(key, cursor) > 0. A key for which it
// is false comes in the next round, after the keys for which it is true
// (KeyCompare). O(len) and safe for concurrent use.
func KeyAfter(key, cursor string) bool {
	return KeyCompare(key, cursor) > 0
}
