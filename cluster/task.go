package cluster

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/task"
)

// taskColumns are the columns row reads, in its order.
const taskColumns = `job_id, queue, id, state, priority, due, fire_at, created, ttr, attempts,
	max_attempts, lease, lease_until, timeouts, releases, buries, kicks, payload, partition, last_error,
	coalesce(trace_parent, '') AS trace_parent, coalesce(trace_state, '') AS trace_state, task_key`

// row is a task as hourglass_tasks records it (see
// migrations/).
type row struct {
	job                     int64
	queue, id               string
	state                   int16
	priority, due           int64
	fireAt                  *int64
	created, ttr, attempts  int64
	maxAttempts             int64
	lease                   string
	leaseUntil              int64
	timeouts, releases      int64
	buries, kicks           int64
	payload                 []byte
	partition               int
	lastError               string
	traceParent, traceState string
	key                     string
	// readyAt is when a flush made the task ready (Unix ns, the
	// database's clock), for the lateness's split; 0: at its due time
	// (service.SplitLateness). Read only by the reserves.
	readyAt int64
}

// scanRow reads a row of taskColumns, then extra.
func scanRow(r pgx.Row, extra ...any) (row, error) {
	return newRowScanner(extra...).scan(r)
}

// rowScanner reads rows of taskColumns, then extra, through scan
// destinations made once: a statement's rows read by one rowScanner cost
// no allocation each but what pgx makes for their strings and payload
// (scanRow made the row and its destinations anew for each, about a
// kilobyte a task reserved). Not safe for concurrent use.
type rowScanner struct {
	t    row
	dest []any
}

// newRowScanner returns a rowScanner whose rows end with extra.
func newRowScanner(extra ...any) *rowScanner {
	s := &rowScanner{}
	t := &s.t
	s.dest = append([]any{&t.job, &t.queue, &t.id, &t.state, &t.priority, &t.due, &t.fireAt, &t.created, &t.ttr,
		&t.attempts, &t.maxAttempts, &t.lease, &t.leaseUntil, &t.timeouts, &t.releases, &t.buries, &t.kicks,
		&t.payload, &t.partition, &t.lastError, &t.traceParent, &t.traceState, &t.key}, extra...)
	return s
}

// scan reads r's row, and its extra columns into the destinations
// newRowScanner was given.
func (s *rowScanner) scan(r pgx.Row) (row, error) {
	s.t = row{}
	err := r.Scan(s.dest...)
	t := s.t
	if t.payload == nil {
		t.payload = []byte{}
	}
	return t, err
}

// stateOf is the broker's state of a recorded task: a waiting task with a
// timer is delayed, one without is ready.
func (t *row) stateOf() task.State {
	switch t.state {
	case 1:
		if t.fireAt != nil {
			return task.Delayed
		}
		return task.Ready
	case 2:
		return task.Reserved
	}
	return task.Dead
}

// view turns a row into the Task the API reports (as broker's view).
func (t *row) view() task.Task {
	v := task.Task{
		ID:          t.id,
		JobID:       uint64(t.job),
		Queue:       t.queue,
		State:       t.stateOf(),
		Payload:     t.payload,
		Priority:    uint32(t.priority),
		Due:         time.Unix(0, t.due).UTC(),
		TTR:         time.Duration(t.ttr),
		Attempts:    int(t.attempts),
		MaxAttempts: int(t.maxAttempts),
		Created:     time.Unix(0, t.created).UTC(),
		Timeouts:    int(t.timeouts),
		Releases:    int(t.releases),
		Buries:      int(t.buries),
		Kicks:       int(t.kicks),
		LastError:   t.lastError,
		Trace:       task.Trace{Parent: t.traceParent, State: t.traceState},
		Key:         t.key,
	}
	if t.state == 2 {
		v.LeaseUntil = time.Unix(0, t.leaseUntil).UTC()
	}
	return v
}
