package task

import "time"

// Outcomes of an Attempt: how one reservation (or push) of a task ended.
const (
	AttemptAcked      = "acked"
	AttemptNacked     = "nacked"
	AttemptReleased   = "released"
	AttemptBuried     = "buried"
	AttemptExpired    = "expired"     // its lease ran out
	AttemptPushed     = "pushed"      // a push answered 2xx
	AttemptPushFailed = "push-failed" // a push that failed (its Error says how)
	AttemptCancelled  = "cancelled"   // the task was cancelled while reserved (service.Cancel)
)

// Attempt is one attempt of a task: a reservation by a worker, or a
// push, from its start to its end. A running attempt has a zero Ended
// and no Outcome.
//
// Attempt numbers it as the task's attempts count it (task.Task's
// Attempts while it ran) in Queue, the queue it ran in: a release that
// gives its attempt back (Release over HTTP) gives back its number too,
// so the next attempt has the same one, and a task moved to a
// dead-letter queue starts there from 1 again. N numbers the task's
// attempt records, every reservation answered one, a release included:
// what the records kept (AttemptsKeptFirst, AttemptsKeptLast) and the
// ones left out are counted by. For example a task nacked, released,
// nacked and dead-lettered, then reserved in its dead-letter queue, has
// the records (N, Attempt, Queue) (1, 1, q), (2, 2, q) released, (3, 2,
// q), and the running (4, 1, q-dead).
type Attempt struct {
	N       int // 1 for the first record
	Attempt int // 1 for the first attempt in Queue; 0 in a record kept before it was numbered so
	Queue   string
	Started time.Time
	Ended   time.Time
	Outcome string // one of the Attempt* outcomes; "" while running
	Error   string // the nack's, bury's or push's error, if any
	Status  int    // the HTTP status a push got; 0 for none
	// Node is the cluster node that ended the attempt: the one whose
	// call ended it (an ack, nack, release, bury, delete or cancel), or,
	// for a lease that ran out, the owner of its task's partition, which
	// settled it. "" while it runs, and on the embedded engine, which is
	// one node and names none. The node that handed it out is not kept.
	Node string
}

// Outcomes of a Finished task: how it left its queue.
const (
	FinishedAcked     = "acked"     // acked, or pushed with a 2xx answer
	FinishedDead      = "dead"      // used up its attempts or was buried (moved to a dead-letter queue, or dead in its queue)
	FinishedDeleted   = "deleted"   // deleted by a client, dead or not
	FinishedCancelled = "cancelled" // cancelled by a client (service.Cancel), in any state
)

// Finished is a task in a queue's history: one that was acked, died or
// was deleted, kept for the server's history retention.
type Finished struct {
	ID        string
	JobID     uint64
	Queue     string
	Outcome   string // one of the Finished* outcomes
	Finished  time.Time
	Attempts  int
	LastError string
}

// Limits of the history.
const (
	// DefaultHistory is how long finished tasks and their attempts are
	// kept by default (hourglass serve --history).
	DefaultHistory = 24 * time.Hour
	// MaxAttemptsListed bounds the attempts one answer lists (the newest).
	MaxAttemptsListed = 1000
	// AttemptsKeptFirst and AttemptsKeptLast bound the attempt records
	// of one task, live or finished: its first AttemptsKeptFirst and its
	// last AttemptsKeptLast. Recording attempt n removes attempt
	// n − AttemptsKeptLast when that is past the first ones: O(1) an
	// attempt, so a task failing for ever holds at most
	// AttemptsKeptFirst + AttemptsKeptLast records. The numbers left out
	// are the answer's "dropped".
	AttemptsKeptFirst = 5
	AttemptsKeptLast  = 100
)
