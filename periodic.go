package hourglass

import (
	"fmt"
	"math"
	"time"
)

// Schedule tells a periodic timeout when to run next. Next receives the
// time of the run that just ended and returns the time of the next; a zero
// time ends the schedule. [Cron] makes one from a cron line.
type Schedule interface {
	Next(time.Time) time.Time
}

// periodic is the state of a periodic timeout beyond its Timeout: its
// schedule. Its run method is the Timeout's callback, through which the
// shard runs f and files the timeout again at next. All fields but f are
// guarded by the shard's mu.
type periodic struct {
	to    *Timeout
	f     func()
	kind  periodKind
	every uint64   // period or delay, in nanoseconds
	sched Schedule // for kindSchedule

	reset    bool   // Reset was called during a run:
	resetAt  uint64 // the next run is then at resetAt,
	resetDue bool   // due at once if the Reset's d was zero or less
}

type periodKind uint8

const (
	kindRate periodKind = iota
	kindDelay
	kindSchedule
)

// ScheduleAtFixedRate runs f first after initialDelay and then every
// period: the k-th run is due at initialDelay + k·period from now, whatever
// the runs before it took. Runs never overlap: a run that overruns delays
// the next, which then starts as soon as it ends, and the ones after catch
// up with the grid (as in Java's ScheduledExecutorService). A negative
// initialDelay counts as zero; period must be positive. A panic in f goes
// to the panic handler and later runs go on. Cancel the returned Timeout to
// end it.
func (t *Timer) ScheduleAtFixedRate(initialDelay, period time.Duration, f func()) (*Timeout, error) {
	t.mustBeMade("ScheduleAtFixedRate")
	if err := checkPeriodic("ScheduleAtFixedRate", period, f); err != nil {
		return nil, err
	}
	now := t.now()
	return t.schedulePeriodic(now, after(now, initialDelay), &periodic{f: f, kind: kindRate, every: uint64(period)})
}

// ScheduleWithFixedDelay runs f first after initialDelay and then delay
// after the end of each run, so runs never overlap and the gap between
// them is always at least delay. A negative initialDelay counts as zero;
// delay must be positive. A panic in f goes to the panic handler and later
// runs go on. Cancel the returned Timeout to end it.
func (t *Timer) ScheduleWithFixedDelay(initialDelay, delay time.Duration, f func()) (*Timeout, error) {
	t.mustBeMade("ScheduleWithFixedDelay")
	if err := checkPeriodic("ScheduleWithFixedDelay", delay, f); err != nil {
		return nil, err
	}
	now := t.now()
	return t.schedulePeriodic(now, after(now, initialDelay), &periodic{f: f, kind: kindDelay, every: uint64(delay)})
}

// Schedule runs f at each time s gives: first at s.Next(now), then at
// s.Next of the later of the previous run's due time and its end, so a run
// that overruns skips the times it missed instead of firing them in a
// burst. The timeout ends when Next returns the zero time. It returns an
// error if s is nil, f is nil or s has no first time. A panic in f goes to
// the panic handler and later runs go on. Cancel the returned Timeout to
// end it.
func (t *Timer) Schedule(s Schedule, f func()) (*Timeout, error) {
	t.mustBeMade("Schedule")
	if s == nil || f == nil {
		return nil, fmt.Errorf("hourglass: Schedule: nil schedule or func")
	}
	if t.err != nil {
		return nil, t.err
	}
	now := t.now()
	first := s.Next(t.timeOf(now))
	if first.IsZero() {
		return nil, fmt.Errorf("hourglass: Schedule: the schedule has no next time")
	}
	return t.schedulePeriodic(now, t.at(first), &periodic{f: f, kind: kindSchedule, sched: s})
}

func checkPeriodic(name string, every time.Duration, f func()) error {
	if f == nil {
		return fmt.Errorf("hourglass: %s: nil func", name)
	}
	if every <= 0 {
		return fmt.Errorf("hourglass: %s: period %v is not positive", name, every)
	}
	return nil
}

// schedulePeriodic queues p's timeout for its first run at when, counted
// from the reading now.
func (t *Timer) schedulePeriodic(now, when uint64, p *periodic) (*Timeout, error) {
	return t.schedule(now, when, p.run, p)
}

// resetTo makes the run after the current one due at when, due telling
// whether when had come at the Reset. sh.mu is held.
func (p *periodic) resetTo(when uint64, due bool) {
	p.reset, p.resetAt, p.resetDue = true, when, due
}

// run is the callback of a periodic timeout: its shard runs f and files
// the timeout again (shard.rerun).
func (p *periodic) run() { p.to.sh.rerun(p) }

// next returns the deadline of the run after one due at last that has
// just ended, read on c, and whether it is due at once; ok is false when
// the schedule has ended. The shard's mu is held.
func (p *periodic) next(last uint64, c clock) (when uint64, due, ok bool) {
	switch {
	case p.reset:
		p.reset = false
		return p.resetAt, p.resetDue, true
	case p.kind == kindRate:
		return addSat(last, p.every), false, true
	case p.kind == kindDelay:
		return addSat(c.now(), p.every), false, true
	}
	n := p.sched.Next(c.timeOf(max(last, c.now())))
	if n.IsZero() {
		return 0, false, false
	}
	return c.at(n), false, true
}

// addSat returns a+b, or math.MaxUint64 if that overflows.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
