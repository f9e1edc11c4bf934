package service

import "github.com/hourglass-go/hourglass/task"

// DroppedAttempts returns how many attempt records of a task as Attempts
// answers them (oldest first) are left out: the record numbers
// (task.Attempt's N, not its Attempt) from 1 to the last one's that as
// does not hold. Both engines number a task's records without gaps, keep
// the first task.AttemptsKeptFirst and the last task.AttemptsKeptLast
// records of a task, and list at most task.MaxAttemptsListed. O(1).
func DroppedAttempts(as []task.Attempt) int {
	if len(as) == 0 {
		return 0
	}
	return max(0, as[len(as)-1].N-len(as))
}
