package service

import (
	"fmt"
	"time"

	"github.com/hourglass-go/hourglass/task"
)

// MaxTTR bounds a task's time to run: a lease never lasts longer than a
// day. A worker that needs longer touches its lease.
const MaxTTR = 24 * time.Hour

// CheckQueue returns an error wrapping task.ErrInvalid, saying what is
// wrong, if name is not a valid queue (or schedule) name: 1 to 200 bytes
// of ASCII letters, digits, '.', '_' and '-', not "." or "..". Transports
// use it to refuse a request as a whole.
func CheckQueue(name string) error {
	if len(name) == 0 || len(name) > task.MaxNameLen {
		return fmt.Errorf("%w: queue name must be 1 to %d characters", task.ErrInvalid, task.MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: queue name %q: only ASCII letters, digits, '.', '_' and '-'", task.ErrInvalid, name)
		}
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: queue name %q cannot be a path segment", task.ErrInvalid, name)
	}
	return nil
}

// CheckID returns an error wrapping task.ErrInvalid, saying what is
// wrong, if id is not a valid task id: 1 to 200 printable ASCII bytes, no
// '/' or space, not "." or "..".
func CheckID(id string) error {
	if len(id) == 0 || len(id) > task.MaxNameLen {
		return fmt.Errorf("%w: task id must be 1 to %d characters", task.ErrInvalid, task.MaxNameLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("%w: task id %q: printable ASCII only, no '/' or space", task.ErrInvalid, id)
		}
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: task id %q cannot be a path segment", task.ErrInvalid, id)
	}
	return nil
}

// Limits are a server's limits on a put, set by flags of `hourglass
// serve`; the zero Limits take the defaults of package task.
type Limits struct {
	MaxDelay   time.Duration // default task.DefaultMaxDelay
	MaxPayload int           // bytes; default task.DefaultMaxPayload
	DefaultTTR time.Duration // default task.DefaultTTR
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxDelay <= 0 {
		l.MaxDelay = task.DefaultMaxDelay
	}
	if l.MaxPayload <= 0 {
		l.MaxPayload = task.DefaultMaxPayload
	}
	if l.DefaultTTR <= 0 {
		l.DefaultTTR = task.DefaultTTR
	}
	return l
}

// CheckPut checks r against the limits maxDelay and maxPayload as every
// engine's put does and returns the task's due time (Unix ns) for a put
// at now. Errors wrap task.ErrInvalid or task.ErrTooLarge and say what is
// wrong, so that a client cannot tell the engines apart by their answers.
func CheckPut(r *task.PutRequest, now time.Time, maxDelay time.Duration, maxPayload int) (int64, error) {
	if r.ID != "" {
		if err := CheckID(r.ID); err != nil {
			return 0, err
		}
	}
	if len(r.Payload) > maxPayload {
		return 0, fmt.Errorf("%w: %d bytes, over the limit of %d", task.ErrTooLarge, len(r.Payload), maxPayload)
	}
	if r.Delay != 0 && !r.At.IsZero() {
		return 0, fmt.Errorf("%w: give delay or at, not both", task.ErrInvalid)
	}
	if r.Delay < 0 {
		return 0, fmt.Errorf("%w: negative delay %s", task.ErrInvalid, r.Delay)
	}
	if r.Delay > maxDelay {
		return 0, fmt.Errorf("%w: delay %s over the limit of %s", task.ErrInvalid, r.Delay, maxDelay)
	}
	if r.TTR < 0 {
		return 0, fmt.Errorf("%w: negative ttr %s", task.ErrInvalid, r.TTR)
	}
	if r.TTR != 0 && r.TTR < time.Millisecond {
		return 0, fmt.Errorf("%w: ttr %s under 1ms", task.ErrInvalid, r.TTR)
	}
	if r.TTR > MaxTTR {
		return 0, fmt.Errorf("%w: ttr %s over the limit of %s", task.ErrInvalid, r.TTR, MaxTTR)
	}
	if r.MaxAttempts < 0 || int64(r.MaxAttempts) > int64(^uint32(0)) {
		return 0, fmt.Errorf("%w: max_attempts %d out of range", task.ErrInvalid, r.MaxAttempts)
	}
	if !r.At.IsZero() {
		if r.At.Sub(now) > maxDelay {
			return 0, fmt.Errorf("%w: at %s is further than %s away", task.ErrInvalid, r.At.UTC().Format(time.RFC3339Nano), maxDelay)
		}
		if y := r.At.Year(); y < 1970 || y > 2262 {
			return 0, fmt.Errorf("%w: at %s out of range", task.ErrInvalid, r.At.UTC().Format(time.RFC3339Nano))
		}
		return r.At.UnixNano(), nil
	}
	return now.Add(r.Delay).UnixNano(), nil
}

// ErrBatch is the answer to a batch put of over task.MaxBatch tasks.
var ErrBatch = fmt.Errorf("%w: over %d tasks in one batch", task.ErrInvalid, task.MaxBatch)

// The checks below are those of the other operations; each engine calls
// them first, so that a bad argument gets the same answer on either, and
// changes nothing.

// CheckDelay checks a delay given to a nack, a release or a pause (what
// names it in the message): 0 to max.
func CheckDelay(what string, d, max time.Duration) error {
	if d < 0 || d > max {
		return fmt.Errorf("%w: %s must be 0 to %s", task.ErrInvalid, what, max)
	}
	return nil
}

// CheckLease checks that a lease was given.
func CheckLease(lease string) error {
	if lease == "" {
		return fmt.Errorf("%w: lease is required", task.ErrInvalid)
	}
	return nil
}

// CheckReserve checks a reserve of up to max tasks from queues, waiting
// up to wait: at least one valid queue name, max 1 to task.MaxReserve,
// wait 0 to task.MaxWait.
func CheckReserve(queues []string, max int, wait time.Duration) error {
	if len(queues) == 0 {
		return fmt.Errorf("%w: no queue to reserve from", task.ErrInvalid)
	}
	for _, q := range queues {
		if err := CheckQueue(q); err != nil {
			return err
		}
	}
	if max < 1 || max > task.MaxReserve {
		return fmt.Errorf("%w: max must be 1 to %d", task.ErrInvalid, task.MaxReserve)
	}
	if wait < 0 || wait > task.MaxWait {
		return fmt.Errorf("%w: wait must be 0 to %s", task.ErrInvalid, task.MaxWait)
	}
	return nil
}

// CheckPeek checks a peek at queue's next task in state st: ready,
// delayed or dead.
func CheckPeek(queue string, st task.State) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	if st != task.Ready && st != task.Delayed && st != task.Dead {
		return fmt.Errorf("%w: cannot peek %s tasks", task.ErrInvalid, st)
	}
	return nil
}

// CheckList checks a page of up to limit tasks of queue in state st (0:
// any).
func CheckList(queue string, st task.State, limit int) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	if limit < 1 || limit > task.MaxList {
		return fmt.Errorf("%w: limit must be 1 to %d", task.ErrInvalid, task.MaxList)
	}
	if st > task.Dead {
		return fmt.Errorf("%w: no state %d", task.ErrInvalid, st)
	}
	return nil
}

// CheckFinished checks a page of queue's history (History.FinishedTasks):
// outcome "" or one of the task.Finished* outcomes, limit 1 to
// task.MaxList.
func CheckFinished(queue, outcome string, limit int) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	switch outcome {
	case "", task.FinishedAcked, task.FinishedDead, task.FinishedDeleted:
	default:
		return fmt.Errorf("%w: outcome %q: want %q, %q, %q or none", task.ErrInvalid, outcome,
			task.FinishedAcked, task.FinishedDead, task.FinishedDeleted)
	}
	if limit < 1 || limit > task.MaxList {
		return fmt.Errorf("%w: limit %d: want 1 to %d", task.ErrInvalid, limit, task.MaxList)
	}
	return nil
}

// CheckDueHistogram checks a due histogram of n windows of width over
// queue ("" for every queue).
func CheckDueHistogram(queue string, width time.Duration, n int) error {
	if queue != "" {
		if err := CheckQueue(queue); err != nil {
			return err
		}
	}
	if width <= 0 || n < 1 || n > task.MaxDueWindows {
		return fmt.Errorf("%w: width must be positive and n 1 to %d", task.ErrInvalid, task.MaxDueWindows)
	}
	return nil
}
