// Package schedrun fires cron schedules, once for both engines: a
// [Runner] keeps a timer per schedule its engine gives it, puts each
// occurrence through the engine's one atomic primitive ([OccurFunc]),
// tries a failed put again after a back-off, and, when the engine takes
// schedules up (the embedded engine's restart, a cluster node taking a
// partition over), puts the occurrences missed that the misfire rule
// keeps. The rules themselves (occurrences across daylight-saving
// changes, misfire, overlap) are service/schedule.go's; the storage of a
// schedule, and the put that records its last occurrence, the engines'.
//
// # The flow of one schedule
//
// Take "tick", "@every 1m", misfire "one", whose last occurrence put was
// 09:00, on a server that was down from 09:00:30 to 09:03:20.
//
//   - 09:03:20, the engine takes it up ([Runner.Sync]): the occurrences
//     after its cursor (09:00) up to now are 09:01, 09:02 and 09:03.
//     service.MissedOccurrences keeps the newest under "one": Occur(09:03),
//     counted put, which records 09:03 as the last, so that a later
//     recovery starts after it; 09:01 and 09:02 count as missed. Under
//     "skip" nothing is put, and Settle(09:03:20) records the three as
//     settled instead. The timer is armed for 09:04.
//   - 09:04: the timer fires; Occur(09:04) puts the task "tick@…09:04:00Z"
//     and records 09:04 as the last, in one commit (or transaction), or,
//     under overlap "skip" with the 09:03 task still waiting, records the
//     skip alone: counted skipped. Armed for 09:05.
//   - 09:05: Occur fails (the store or the database is away). It is tried
//     again after a back-off of about 0.1 s, 0.2 s, 0.4 s … up to 5 s
//     (retry.Backoff), the failures logged about once a second with a
//     count (retry.FailureLog), until it is put, or until the next try
//     would come after 09:06: then 09:05 counts as missed and 09:06, armed
//     after 09:05, fires at once.
//   - 09:05:30, the schedule is deleted, paused or replaced, or the node
//     loses its partition ([Runner.Disarm], [Runner.Retain], or an
//     [Runner.Arm] of the new spec): its timer is cancelled and a retry in
//     progress ends at once. An occurrence whose Occur has begun may still
//     be put; the engine's Occur refuses one of a schedule no longer
//     current where it can tell (ErrGone).
//
// A put is idempotent: an occurrence's task id is "NAME@TIME"
// (service.OccurrenceID), so two puts of one occurrence (a retry after a
// commit whose answer was lost, two owners across a takeover) make one
// task.
//
// # Costs and concurrency
//
// A Runner is safe for concurrent use. Disarm, Next and Version cost
// O(1); Arm and each re-arming one service.NextOccurrence and the
// timer's arming; Sync and Retain O(schedules armed), and the catch-up
// walks the occurrences missed (service.MissedOccurrences). It keeps one
// entry per schedule armed, and at most one goroutine per schedule, while
// an occurrence is being put. A
// firing runs on a goroutine of its own, one at a time per schedule, so a
// slow put of one schedule holds back no other, and the timer's goroutine
// never waits for a put. Occur and Settle are called with no lock of the
// Runner held, so an engine may call the Runner under its own lock (its
// lock, then the Runner's), but never from inside Occur or Settle.
package schedrun

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Schedule is a schedule as its engine gives it to a [Runner]. The Runner
// does not change it, and hands the same value to Occur and Settle.
type Schedule struct {
	Spec task.ScheduleSpec // normalised (service.NormalSchedule)
	Cron hourglass.Schedule
	Loc  *time.Location
	// Version tells two settings of one name apart: the engines pass the
	// time its spec was set, in Unix ns.
	Version int64
	// From is the misfire cursor: the newest occurrence put, skipped or
	// settled, or when the spec was set or resumed if later. [Runner.Sync]
	// catches up the occurrences after it.
	From time.Time
	// Tag is the engine's own: a cluster node's partition of the
	// schedule.
	Tag int
}

// OccurFunc is an engine's primitive: put the task of s's occurrence at
// (service.SchedulePut with service.OccurrenceID; nothing if that task
// was put before), or, under overlap "skip" with s's last task still
// waiting or reserved, judged in the same commit, put nothing and report
// skipped; and record at as s's last occurrence, atomically with the put.
// A cluster node fences it by the epoch of s's partition. It returns
// within ctx's deadline; an error wrapping [ErrGone] ends the firing
// without a retry.
type OccurFunc func(ctx context.Context, s *Schedule, at time.Time) (skipped bool, err error)

// SettleFunc records through as s's misfire cursor if it is later than
// the one recorded: the occurrences up to through are settled, counted
// missed, though none was put to record it. It returns within ctx's
// deadline.
type SettleFunc func(ctx context.Context, s *Schedule, through time.Time) error

// Timer arms the callbacks: *hourglass.Timer is one. A callback must not
// be run under a lock its caller holds, and a Cancel must not wait for a
// running callback.
type Timer interface {
	AfterFunc(d time.Duration, f func()) (*hourglass.Timeout, error)
}

// Metrics counts what became of the occurrences: service.ScheduleMetrics
// is one.
type Metrics interface {
	Occurred(schedule string)
	Skips(schedule string)
	Misses(schedule string, n int)
}

// ErrGone is what an [OccurFunc] wraps when the schedule it was handed
// is no longer current (deleted, paused, replaced, its partition lost) or
// the engine serves no more: the firing ends, with nothing counted.
var ErrGone = errors.New("hourglass: schedule gone")

// DefaultTimeout bounds one call of Occur or Settle.
const DefaultTimeout = 10 * time.Second

// Config is what an engine supplies to a [Runner].
type Config struct {
	// Timer runs the occurrences' callbacks: the engine's cron timer.
	Timer Timer
	// Now is the engine's clock, which occurrences are due by (a cluster
	// node's estimate of its database's clock); nil: time.Now. An
	// occurrence at is armed at.Sub(Now()) from now on Timer's clock.
	Now     func() time.Time
	Occur   OccurFunc
	Settle  SettleFunc
	Metrics Metrics
	Log     *slog.Logger
	// Timeout bounds one call of Occur or Settle; 0: DefaultTimeout.
	Timeout time.Duration
}

// Runner fires the schedules its engine arms: see the package doc for
// the flow. Make it with [New]; Stop it once.
type Runner struct {
	cfg      Config
	failures *retry.FailureLog
	ctx      context.Context // cancelled by Stop
	cancel   context.CancelFunc
	firing   sync.WaitGroup // the firings under way

	mu sync.Mutex
	// armed holds the schedules armed, by name. Guarded by mu.
	armed map[string]*entry
	// stopped is set by Stop. Guarded by mu.
	stopped bool
}

// entry is one schedule armed. s does not change once armed.
type entry struct {
	s Schedule
	// next is the occurrence armed, or being put; zero for none. Guarded
	// by Runner.mu.
	next    time.Time
	timeout *hourglass.Timeout // guarded by Runner.mu
	// gone is closed when the entry is disarmed, ending a firing's wait.
	gone chan struct{}
}

// New returns a Runner with cfg's timer, clock and primitives, arming
// nothing yet.
func New(cfg Config) *Runner {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	r := &Runner{
		cfg:      cfg,
		failures: retry.NewFailureLog(cfg.Log, "hourglass: putting a schedule's occurrence failed; retrying", "hourglass: putting schedules' occurrences works again"),
		armed:    make(map[string]*entry),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// Arm arms s for its first occurrence after after, replacing the
// schedule of its name if armed (a new or replaced spec, a resume): no
// occurrence up to after is put.
func (r *Runner) Arm(s Schedule, after time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.disarmLocked(s.Spec.Name)
	e := &entry{s: s, gone: make(chan struct{})}
	r.armed[s.Spec.Name] = e
	r.armLocked(e, after)
}

// Disarm disarms the schedule name, if armed (deleted, paused). O(1).
func (r *Runner) Disarm(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disarmLocked(name)
}

// Retain disarms every schedule armed for which keep is false (a
// cluster node's partitions lost). keep runs under the Runner's lock and
// must not call it. O(schedules armed).
func (r *Runner) Retain(keep func(s *Schedule) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, e := range r.armed {
		if !keep(&e.s) {
			r.disarmLocked(name)
		}
	}
}

// Next returns the occurrence of schedule name armed or being put, or
// the zero time if it is not armed or never occurs again. O(1).
func (r *Runner) Next(name string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.armed[name]; e != nil {
		return e.next
	}
	return time.Time{}
}

// Version returns the Version of the schedule name armed, and whether it
// is: an engine need not parse again a schedule armed at its version
// before listing it to Sync. O(1).
func (r *Runner) Version(name string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.armed[name]; e != nil {
		return e.s.Version, true
	}
	return 0, false
}

// Sync makes the schedules armed those of list (all of them on the
// embedded engine at its start; on a cluster node those of its
// partitions, not paused, at each lease round): it disarms the others,
// keeps those armed at the same Version (of such a one, only Spec.Name
// and Version are read), and takes up each new or
// changed one: the occurrences after its From up to now are planned by
// service.MissedOccurrences (its misfire rule), put in order and counted,
// the ones missed counted (and settled when none is put: the missed ones
// are older than any put, whose record moves the cursor past them), and
// the next armed. The puts are
// made before Sync returns, within ctx; from the first that fails, the
// rest go on in the background as a firing's retries do.
func (r *Runner) Sync(ctx context.Context, list []Schedule) {
	now := r.cfg.Now()
	listed := make(map[string]bool, len(list))
	var fresh []*entry
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	for _, s := range list {
		listed[s.Spec.Name] = true
		if e := r.armed[s.Spec.Name]; e != nil && e.s.Version == s.Version {
			continue
		}
		if s.Cron == nil { // listed as armed, but disarmed since: the next Sync
			continue
		}
		r.disarmLocked(s.Spec.Name)
		e := &entry{s: s, gone: make(chan struct{})}
		r.armed[s.Spec.Name] = e
		fresh = append(fresh, e)
	}
	for name := range r.armed {
		if !listed[name] {
			r.disarmLocked(name)
		}
	}
	r.mu.Unlock()
	for _, e := range fresh {
		r.catchUp(ctx, e, now)
	}
}

// Stop disarms every schedule, cancels the puts under way and returns
// once every firing has ended. Arm and Sync do nothing after it.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	for name := range r.armed {
		r.disarmLocked(name)
	}
	r.mu.Unlock()
	r.cancel()
	r.firing.Wait()
}

// disarmLocked cancels the timer of schedule name and forgets it. r.mu
// must be held.
func (r *Runner) disarmLocked(name string) {
	e := r.armed[name]
	if e == nil {
		return
	}
	if e.timeout != nil {
		e.timeout.Cancel()
	}
	e.timeout, e.next = nil, time.Time{}
	close(e.gone)
	delete(r.armed, name)
}

// currentLocked reports whether e is still armed. r.mu must be held.
func (r *Runner) currentLocked(e *entry) bool {
	return !r.stopped && r.armed[e.s.Spec.Name] == e
}

func (r *Runner) current(e *entry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.currentLocked(e)
}

// armLocked arms e's timer for its first occurrence after after. r.mu
// must be held.
func (r *Runner) armLocked(e *entry, after time.Time) {
	e.timeout = nil
	e.next = service.NextOccurrence(e.s.Cron, e.s.Loc, after)
	if e.next.IsZero() {
		return
	}
	at := e.next
	to, err := r.cfg.Timer.AfterFunc(max(at.Sub(r.cfg.Now()), 0), func() { r.fired(e, at) })
	if err != nil {
		r.cfg.Log.Error("hourglass: arming a schedule", "schedule", e.s.Spec.Name, "err", err)
		return
	}
	e.timeout = to
}

// fired is e's timer callback for its occurrence at: it starts the
// firing, unless e was disarmed meanwhile.
func (r *Runner) fired(e *entry, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.currentLocked(e) {
		return
	}
	e.timeout = nil
	r.firing.Add(1)
	go r.fire(e, []time.Time{at}, at, false)
}

// catchUp puts the occurrences of e missed between e.s.From and now that
// its misfire rule keeps, counts and settles the others, and arms the
// next after now (Sync).
func (r *Runner) catchUp(ctx context.Context, e *entry, now time.Time) {
	s := &e.s
	put, missed := service.MissedOccurrences(s.Cron, s.Loc, s.Spec.Misfire, s.Spec.CatchUp, s.From, now)
	settle := missed > 0 && len(put) == 0
	for len(put) > 0 {
		if !r.current(e) {
			return
		}
		if err := r.occur(ctx, e, put[0]); err != nil {
			if errors.Is(err, ErrGone) {
				return
			}
			r.failures.Failed(err, "schedule", s.Spec.Name, "at", put[0])
			break
		}
		put = put[1:]
	}
	if missed > 0 {
		r.cfg.Metrics.Misses(s.Spec.Name, missed)
	}
	if settle {
		sctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		err := r.cfg.Settle(sctx, s, now)
		cancel()
		// Not settled, a later recovery counts them again: the count is
		// an upper bound then.
		if err != nil && !errors.Is(err, ErrGone) {
			r.cfg.Log.Warn("hourglass: recording a schedule's missed occurrences", "schedule", s.Spec.Name, "err", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.currentLocked(e) {
		return
	}
	if len(put) > 0 {
		r.firing.Add(1)
		go r.fire(e, put, now, true)
		return
	}
	r.armLocked(e, now)
}

// fire puts e's occurrences ats in order, each tried again after a
// back-off while it fails, until it is put or the next try would come
// after the first occurrence after after; the ones left then count as
// missed. failed says the first was tried and failed already (a
// catch-up): fire waits a back-off before its first try then. Then it
// arms e for that occurrence, unless e was disarmed meanwhile. It runs
// on a goroutine of its own, at most one per entry.
func (r *Runner) fire(e *entry, ats []time.Time, after time.Time, failed bool) {
	defer r.firing.Done()
	name := e.s.Spec.Name
	deadline := service.NextOccurrence(e.s.Cron, e.s.Loc, after)
	backoff := retry.Backoff{Base: retry.DefaultBase, Max: retry.DefaultMax}
	for len(ats) > 0 {
		if failed {
			wait := backoff.Next()
			if !deadline.IsZero() && !r.cfg.Now().Add(wait).Before(deadline) {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-e.gone: // disarmed, or Stop
				t.Stop()
				return
			}
		}
		err := r.occur(r.ctx, e, ats[0])
		if err == nil {
			if backoff.Failures() > 0 {
				r.failures.OK()
			}
			backoff.Reset()
			failed = false
			ats = ats[1:]
			continue
		}
		if errors.Is(err, ErrGone) || !r.current(e) {
			return
		}
		r.failures.Failed(err, "schedule", name, "at", ats[0])
		failed = true
	}
	if len(ats) > 0 {
		// Logged as failures already: a line each would be a line a
		// second for each schedule of a store that is away.
		r.cfg.Metrics.Misses(name, len(ats))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.currentLocked(e) {
		r.armLocked(e, after)
	}
}

// occur calls Occur for e's occurrence at within the timeout, and counts
// what became of it.
func (r *Runner) occur(ctx context.Context, e *entry, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	skipped, err := r.cfg.Occur(ctx, &e.s, at)
	switch {
	case err != nil:
		return err
	case skipped:
		r.cfg.Metrics.Skips(e.s.Spec.Name)
	default:
		r.cfg.Metrics.Occurred(e.s.Spec.Name)
	}
	return nil
}
