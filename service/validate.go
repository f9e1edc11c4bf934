package service

import (
	"context"
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

// CheckKey returns an error wrapping task.ErrInvalid, saying what is
// wrong, if key is not a valid task key: the rules of an id (1 to 200
// printable ASCII bytes, no '/' or space). "" (no key) is valid.
func CheckKey(key string) error {
	if key == "" {
		return nil
	}
	if len(key) > task.MaxNameLen {
		return fmt.Errorf("%w: key must be 1 to %d characters", task.ErrInvalid, task.MaxNameLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c > '~' || c == '/' {
			return fmt.Errorf("%w: key %q: printable ASCII only, no '/' or space", task.ErrInvalid, key)
		}
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

// CheckPut checks r against the limits maxDelay and maxPayload, as New's
// Put and PutBatch do, and returns the task's due time (Unix ns) for a put
// at now. Errors wrap task.ErrInvalid or task.ErrTooLarge and say what is
// wrong, so that a client cannot tell the engines apart by their answers.
//
// CheckPut also drops what of r.Trace is not valid W3C trace context
// (task.Trace.Clean): a malformed trace never fails a put.
func CheckPut(r *task.PutRequest, now time.Time, maxDelay time.Duration, maxPayload int) (int64, error) {
	r.Trace = r.Trace.Clean()
	if r.ID != "" {
		if err := CheckID(r.ID); err != nil {
			return 0, err
		}
	}
	if err := CheckKey(r.Key); err != nil {
		return 0, err
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
	if r.MaxAttempts < task.UnlimitedAttempts || int64(r.MaxAttempts) > int64(^uint32(0)) {
		return 0, fmt.Errorf("%w: max_attempts %d out of range: give 1..%d, %d for no limit, or 0 for the queue's (default %d)",
			task.ErrInvalid, r.MaxAttempts, int64(^uint32(0)), task.UnlimitedAttempts, DefaultMaxAttempts)
	}
	if !r.At.IsZero() {
		if r.At.Sub(now) > maxDelay {
			return 0, fmt.Errorf("%w: at %s is further than %s away", task.ErrInvalid, r.At.UTC().Format(time.RFC3339Nano), maxDelay)
		}
		if y := r.At.Year(); y < 1970 || y > 2262 {
			return 0, fmt.Errorf("%w: at %s out of range", task.ErrInvalid, r.At.UTC().Format(time.RFC3339Nano))
		}
	}
	return Due(r, now), nil
}

// Due returns when a put of r at now falls due (Unix ns): r.At if given,
// else now plus r.Delay. r is one CheckPut accepted.
func Due(r *task.PutRequest, now time.Time) int64 {
	if !r.At.IsZero() {
		return r.At.UnixNano()
	}
	return now.Add(r.Delay).UnixNano()
}

// ErrBatch is the answer to a batch put of over task.MaxBatch tasks.
var ErrBatch = fmt.Errorf("%w: over %d tasks in one batch", task.ErrInvalid, task.MaxBatch)

// The checks below are those of the other operations; New calls them
// before the engine, so that a bad argument gets the same answer on
// either, and changes nothing.

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

// CheckFinished checks a page of queue's history (History.FinishedTasks):
// outcome "" or one of the task.Finished* outcomes, limit 1 to
// task.MaxList.
func CheckFinished(queue, outcome string, limit int) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	switch outcome {
	case "", task.FinishedAcked, task.FinishedDead, task.FinishedDeleted, task.FinishedCancelled:
	default:
		return fmt.Errorf("%w: outcome %q: want %q, %q, %q, %q or none", task.ErrInvalid, outcome,
			task.FinishedAcked, task.FinishedDead, task.FinishedDeleted, task.FinishedCancelled)
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

// DueWindow returns the window of a due histogram of n windows of width
// from now (Unix ns) that a delayed task due at due falls in: i when due
// is in [now+i·width, now+(i+1)·width), and false before now (a task
// about to be made ready) or past the last window. Both engines count by
// it: the embedded engine calls it, a cluster node's statement compares
// the same bounds in SQL (cluster/observe.go, DueHistogram). O(1).
func DueWindow(due, now int64, width time.Duration, n int) (int, bool) {
	if due < now {
		return 0, false
	}
	i := (due - now) / int64(width)
	return int(i), i < int64(n)
}

// The front: New applies the checks above to every operation, once for
// both engines.

// New returns the Service over e: each method checks its arguments, as
// the checks of this package say, and answers a bad one with an error
// wrapping task.ErrInvalid (or task.ErrTooLarge) without calling e;
// otherwise it is e's method. A batch (PutBatch, AckMany) answers its bad
// items alone and hands e the rest. The checks cost O(size of the
// arguments) and take no lock.
//
// When e is a PolicyNotifier (a cluster node), so is the Service.
func New(e Engine) Service {
	f := &front{e: e, lim: e.Limits().WithDefaults(), cancels: newCancels()}
	if le, ok := e.(LeaseEnder); ok {
		le.NotifyLeaseEnds(func(lease string) { f.cancels.leaseEnded(lease, time.Now()) })
	}
	if n, ok := e.(PolicyNotifier); ok {
		return notifyingFront{f, n}
	}
	return f
}

// notifyingFront is the Service of New over an engine that is a
// PolicyNotifier.
type notifyingFront struct {
	*front
	n PolicyNotifier
}

// NotifyPolicies is the engine's (PolicyNotifier).
func (f notifyingFront) NotifyPolicies(fn func(queue string)) { f.n.NotifyPolicies(fn) }

// front is the Service of New.
type front struct {
	e   Engine
	lim Limits
	// cancels is what the engine reported of leases ended (cancel.go).
	cancels *cancels
}

func (*front) checked() {}

// Limits is Service.Limits.
func (f *front) Limits() Limits { return f.lim }

// Err is Service.Err.
func (f *front) Err() error { return f.e.Err() }

// CheckCron is Service.CheckCron: package-level CheckCron at now.
func (f *front) CheckCron(line, timezone string, n int) ([]time.Time, error) {
	return CheckCron(line, timezone, n, time.Now())
}

// checkTask checks the address of a task: its queue and id.
func checkTask(queue, id string) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	return CheckID(id)
}

// checkHeld checks the arguments of an operation on a reserved task.
func checkHeld(queue, id, lease string) error {
	if err := CheckLease(lease); err != nil {
		return err
	}
	return checkTask(queue, id)
}

// checkRetry checks a nack's delay: task.RetryDelay (the policy's), or
// 0 to max.
func checkRetry(delay, max time.Duration) error {
	if delay == task.RetryDelay {
		return nil
	}
	return CheckDelay("delay", delay, max)
}

func (f *front) Put(ctx context.Context, queue string, r task.PutRequest) (task.Task, bool, error) {
	if err := CheckQueue(queue); err != nil {
		return task.Task{}, false, err
	}
	if _, err := CheckPut(&r, time.Now(), f.lim.MaxDelay, f.lim.MaxPayload); err != nil {
		return task.Task{}, false, err
	}
	res := f.e.PutBatch(ctx, queue, []task.PutRequest{r})
	return res[0].Task, res[0].Created, res[0].Err
}

// PutBatch checks the batch, then each request: the engine is handed
// only the good ones (rs itself when all are), in order, and their
// answers are put back in place.
func (f *front) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	err := CheckQueue(queue)
	if err == nil && len(rs) > task.MaxBatch {
		err = ErrBatch
	}
	if err != nil {
		res := make([]task.PutResult, len(rs))
		for i := range res {
			res[i].Err = err
		}
		return res
	}
	now := time.Now()
	var res []task.PutResult // made at the first bad request
	bad := 0
	for i := range rs {
		if _, err := CheckPut(&rs[i], now, f.lim.MaxDelay, f.lim.MaxPayload); err != nil {
			if res == nil {
				res = make([]task.PutResult, len(rs))
			}
			res[i].Err = err
			bad++
		}
	}
	switch bad {
	case 0:
		return f.e.PutBatch(ctx, queue, rs)
	case len(rs):
		return res
	}
	good := make([]task.PutRequest, 0, len(rs)-bad)
	for i := range rs {
		if res[i].Err == nil {
			good = append(good, rs[i])
		}
	}
	got := f.e.PutBatch(ctx, queue, good)
	k := 0
	for i := range res {
		if res[i].Err == nil {
			res[i] = got[k]
			k++
		}
	}
	return res
}

func (f *front) Get(queue, id string) (task.Task, error) {
	if err := checkTask(queue, id); err != nil {
		return task.Task{}, err
	}
	return f.e.Read(TaskRef{Queue: queue, ID: id})
}

func (f *front) Reserve(ctx context.Context, queue string, max int, wait time.Duration) ([]task.Task, error) {
	if err := CheckReserve([]string{queue}, max, wait); err != nil {
		return nil, err
	}
	return f.e.ReserveQueues(ctx, []string{queue}, max, wait)
}

func (f *front) ReserveQueues(ctx context.Context, queues []string, max int, wait time.Duration) ([]task.Task, error) {
	if err := CheckReserve(queues, max, wait); err != nil {
		return nil, err
	}
	return f.e.ReserveQueues(ctx, queues, max, wait)
}

// Ack is AckMany of one.
func (f *front) Ack(ctx context.Context, queue, id, lease string) error {
	if err := checkHeld(queue, id, lease); err != nil {
		return err
	}
	errs, err := f.e.AckMany(ctx, []task.Ack{{Queue: queue, ID: id, Lease: lease}})
	if err != nil {
		return err
	}
	return errs[0]
}

// AckMany checks the batch, then each ack, as PutBatch does.
func (f *front) AckMany(ctx context.Context, acks []task.Ack) ([]error, error) {
	if err := CheckAcks(acks); err != nil {
		return nil, err
	}
	var errs []error // made at the first bad ack
	bad := 0
	for i, a := range acks {
		if err := checkHeld(a.Queue, a.ID, a.Lease); err != nil {
			if errs == nil {
				errs = make([]error, len(acks))
			}
			errs[i] = err
			bad++
		}
	}
	switch bad {
	case 0:
		return f.e.AckMany(ctx, acks)
	case len(acks):
		return errs, nil
	}
	good := make([]task.Ack, 0, len(acks)-bad)
	for i, a := range acks {
		if errs[i] == nil {
			good = append(good, a)
		}
	}
	got, err := f.e.AckMany(ctx, good)
	if err != nil {
		return nil, err
	}
	k := 0
	for i := range errs {
		if errs[i] == nil {
			errs[i] = got[k]
			k++
		}
	}
	return errs, nil
}

func (f *front) Touch(ctx context.Context, queue, id, lease string) (task.Task, error) {
	if err := checkHeld(queue, id, lease); err != nil {
		return task.Task{}, err
	}
	return f.e.Settle(ctx, queue, id, lease, Settlement{Outcome: Renewed})
}

func (f *front) Queues(ctx context.Context) ([]task.QueueStats, error) {
	return f.e.Queues(ctx)
}

// Job is Engine.Read by job id; job 0 is no task's.
func (f *front) Job(job uint64) (task.Task, error) {
	if job == 0 {
		return task.Task{}, task.ErrNotFound
	}
	return f.e.Read(TaskRef{Job: job})
}

func (f *front) ReserveJob(ctx context.Context, job uint64) (task.Task, error) {
	return f.e.ReserveJob(ctx, job)
}

func (f *front) PauseQueue(ctx context.Context, queue string, d time.Duration) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	if d != task.PauseIndefinitely {
		if err := CheckDelay("pause", d, f.lim.MaxDelay); err != nil {
			return err
		}
	}
	_, err := f.e.SetQueue(ctx, queue, QueueChange{Pause: &d})
	return err
}

func (f *front) Queue(queue string) (task.QueueDetail, error) {
	if err := CheckQueue(queue); err != nil {
		return task.QueueDetail{}, err
	}
	return f.e.Queue(queue)
}

func (f *front) SetPolicy(ctx context.Context, queue string, p task.Policy) (task.Policy, error) {
	if err := CheckQueue(queue); err != nil {
		return task.Policy{}, err
	}
	if err := CheckPolicy(queue, p); err != nil {
		return task.Policy{}, err
	}
	p = NormalPolicy(p)
	return f.e.SetQueue(ctx, queue, QueueChange{Policy: &p})
}

func (f *front) Policy(ctx context.Context, queue string) (task.Policy, error) {
	if err := CheckQueue(queue); err != nil {
		return task.Policy{}, err
	}
	return f.e.Policy(ctx, queue)
}

func (f *front) DeletePolicy(ctx context.Context, queue string) error {
	if err := CheckQueue(queue); err != nil {
		return err
	}
	var zero task.Policy
	_, err := f.e.SetQueue(ctx, queue, QueueChange{Policy: &zero})
	return err
}

func (f *front) Attempts(ctx context.Context, queue, id string) ([]task.Attempt, error) {
	if err := checkTask(queue, id); err != nil {
		return nil, err
	}
	return f.e.Attempts(ctx, queue, id)
}

func (f *front) FinishedTasks(ctx context.Context, queue, outcome string, after uint64, limit int) ([]task.Finished, uint64, error) {
	if err := CheckFinished(queue, outcome, limit); err != nil {
		return nil, 0, err
	}
	return f.e.FinishedTasks(ctx, queue, FinishedFilter{Outcome: outcome}, after, limit)
}

func (f *front) SetSchedule(ctx context.Context, s task.ScheduleSpec) (task.ScheduleInfo, bool, error) {
	sched, loc, err := ParseSchedule(s, f.lim.MaxPayload)
	if err == nil {
		err = checkNewSchedule(s.Cron, sched, loc, time.Now())
	}
	if err != nil {
		return task.ScheduleInfo{}, false, err
	}
	return f.e.SetSchedule(ctx, s.Name, ScheduleChange{Spec: &s})
}

// Schedule is Engine.Schedules of one name.
func (f *front) Schedule(ctx context.Context, name string) (task.ScheduleInfo, error) {
	if name == "" {
		return task.ScheduleInfo{}, task.ErrNoSchedule
	}
	out, err := f.e.Schedules(ctx, name)
	if err != nil {
		return task.ScheduleInfo{}, err
	}
	if len(out) == 0 {
		return task.ScheduleInfo{}, task.ErrNoSchedule
	}
	return out[0], nil
}

func (f *front) Schedules(ctx context.Context) ([]task.ScheduleInfo, error) {
	return f.e.Schedules(ctx, "")
}

func (f *front) DeleteSchedule(ctx context.Context, name string) error {
	return f.e.DeleteSchedule(ctx, name)
}

func (f *front) Lateness(ctx context.Context) ([]task.LatenessWindow, error) {
	return f.e.Lateness(ctx)
}

func (f *front) DueHistogram(ctx context.Context, queue string, width time.Duration, n int) (time.Time, []int, error) {
	if err := CheckDueHistogram(queue, width, n); err != nil {
		return time.Time{}, nil, err
	}
	return f.e.DueHistogram(ctx, queue, width, n)
}
