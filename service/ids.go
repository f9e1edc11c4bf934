package service

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hourglass-go/hourglass/task"
)

// GeneratedIDTries is how many ids a put without an id tries for its
// task (see [GeneratedID]) before it answers [NoFreeID]: enough that only
// a client that took those very ids on purpose meets the error, and few
// enough that a put costs a bounded number of look-ups (the embedded
// engine's index, a cluster node's statements).
const GeneratedIDTries = 4

// GeneratedID returns the id tried, at try (0 first, below
// GeneratedIDTries), for a task put without an id whose job id is job:
// the job id in decimal, then, where a client chose that id for another
// live task of the queue, the same with "@job" once per try after the
// first ("4", "4@job", "4@job@job", ...). Both engines name a task put
// without an id by the first of these that no live task of its queue
// has. O(try).
func GeneratedID(job uint64, try int) string {
	return strconv.FormatUint(job, 10) + strings.Repeat("@job", try)
}

// NoFreeID is the error of a put without an id whose every GeneratedID
// is taken by other tasks of the queue: task.ErrState (a conflict with
// the queue's tasks, answered 409 over HTTP), never task.ErrClosed, since
// the service still serves; the client can put the task again (a new job
// id, new ids to try) or give it an id.
func NoFreeID(job uint64) error {
	return fmt.Errorf("%w: no free id for a task put without one: %s to %s are ids of other tasks of the queue",
		task.ErrState, GeneratedID(job, 0), GeneratedID(job, GeneratedIDTries-1))
}
