package service

import (
	"time"

	"github.com/hourglass-go/hourglass/task"
)

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

// ListAttempts returns what Engine.Attempts answers for a task: its
// ended attempts (ended, oldest first, as its records hold them) and, if
// running is not nil, the attempt running now, last, with no Ended,
// Outcome nor Node; at most task.MaxAttemptsListed in all, the newest,
// the running one counted among them. An engine reads at most
// AttemptsToRead(running != nil) records. For example, with 1000 records
// and a running attempt it answers records 2 to 1000 and the running
// one. O(len(ended)).
func ListAttempts(ended []task.Attempt, running *task.Attempt) []task.Attempt {
	ended = ended[max(0, len(ended)-AttemptsToRead(running != nil)):]
	out := make([]task.Attempt, 0, len(ended)+1)
	out = append(out, ended...)
	if running != nil {
		r := *running
		r.Ended, r.Outcome, r.Error, r.Status, r.Node = time.Time{}, "", "", 0, ""
		out = append(out, r)
	}
	return out
}

// AttemptsToRead is how many of a task's newest ended attempt records
// ListAttempts keeps: task.MaxAttemptsListed, less one for the running
// attempt when the task is reserved. O(1).
func AttemptsToRead(running bool) int {
	if running {
		return task.MaxAttemptsListed - 1
	}
	return task.MaxAttemptsListed
}
