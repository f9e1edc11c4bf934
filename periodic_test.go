package hourglass_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass"
)

// every is a Schedule that runs every d, for ever.
type every time.Duration

func (d every) Next(t time.Time) time.Time { return t.Add(time.Duration(d)) }

// countdown is a Schedule that runs every d and ends after runs runs. It
// is safe for concurrent use.
type countdown struct {
	every time.Duration
	mu    sync.Mutex
	runs  int
	calls []time.Time // the times Next was asked about
}

func (c *countdown) Next(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, t)
	if c.runs == 0 {
		return time.Time{}
	}
	c.runs--
	return t.Add(c.every)
}

// runLog records the start and end of each run of a periodic callback,
// as virtual time since it was made, and fails the test if two runs
// overlap. It is safe for concurrent use.
type runLog struct {
	t      *testing.T
	start  time.Time
	active atomic.Int32
	mu     sync.Mutex
	starts []time.Duration
	ends   []time.Duration
}

func newRunLog(t *testing.T) *runLog { return &runLog{t: t, start: time.Now()} }

// fn returns a callback that sleeps work(k) in its k-th run (from 0).
func (l *runLog) fn(work func(k int) time.Duration) func() {
	return func() {
		if n := l.active.Add(1); n > 1 {
			l.t.Errorf("%d runs at once at %v", n, time.Since(l.start))
		}
		defer l.active.Add(-1)
		l.mu.Lock()
		k := len(l.starts)
		l.starts = append(l.starts, time.Since(l.start))
		l.mu.Unlock()
		time.Sleep(work(k))
		l.mu.Lock()
		l.ends = append(l.ends, time.Since(l.start))
		l.mu.Unlock()
	}
}

func (l *runLog) runs() (starts, ends []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.starts...), append([]time.Duration(nil), l.ends...)
}

// noWork is the work of a callback that returns at once.
func noWork(int) time.Duration { return 0 }

// TestPeriodic_FixedRateGrid checks that the k-th run of a fixed-rate
// timeout starts at initialDelay + k·period: exactly for the heap and the
// list, within a tick for the wheels, with no drift over many runs.
func TestPeriodic_FixedRateGrid(t *testing.T) {
	forEachSetup(t, executorSetups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		for _, c := range []struct{ initial, period time.Duration }{
			{1500 * µs, 10 * ms},
			{0, 2500*µs + 3},
			{-time.Hour, 7 * ms}, // a negative initial delay counts as zero
		} {
			const runs = 100
			l := newRunLog(t)
			to := must(t)(tm.ScheduleAtFixedRate(c.initial, c.period, l.fn(noWork)))
			initial := max(c.initial, 0)
			advance(initial + (runs-1)*c.period + s.tolerance)
			starts, _ := l.runs()
			if len(starts) != runs {
				t.Fatalf("initial %v, period %v: %d runs, want %d", c.initial, c.period, len(starts), runs)
			}
			for k, at := range starts {
				s.checkOnTime(t, "fixed-rate run", at, initial+time.Duration(k)*c.period)
			}
			if n := tm.Pending(); n != 1 {
				t.Errorf("Pending() = %d with a periodic timeout, want 1", n)
			}
			if !to.Cancel() {
				t.Error("Cancel of a fixed-rate timeout = false, want true")
			}
			advance(10 * c.period)
			if starts, _ := l.runs(); len(starts) != runs {
				t.Errorf("%d runs after Cancel, want none", len(starts)-runs)
			}
			if to.Cancel() {
				t.Error("second Cancel = true, want false")
			}
			if !to.Cancelled() || to.Expired() || tm.Pending() != 0 {
				t.Errorf("after Cancel: Cancelled() = %v, Expired() = %v, Pending() = %d; want true, false, 0", to.Cancelled(), to.Expired(), tm.Pending())
			}
		}
		tm.Stop()
	})
}

// TestPeriodic_FixedRateSlowRuns checks that a fixed-rate run that takes
// longer than the period never overlaps the next, and that each run starts
// as soon as both its grid time and the end of the previous run have come:
// never early, and catching up with the grid after an overrun.
func TestPeriodic_FixedRateSlowRuns(t *testing.T) {
	setups := []setup{inlineOneShard, goroutinesOneShard, goroutinesShards, poolOneShard}
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		const initial, period = 10 * ms, 10 * ms
		work := []time.Duration{25 * ms, 0, 0, 12 * ms, 3 * ms, 35 * ms, 0, 0, 0, 0, 0, 0}
		l := newRunLog(t)
		to := must(t)(tm.ScheduleAtFixedRate(initial, period, l.fn(func(k int) time.Duration {
			return work[k%len(work)]
		})))
		advance(200 * ms)
		to.Cancel()
		advance(100 * ms) // let a run in progress end
		starts, ends := l.runs()
		if len(starts) < len(work) {
			t.Fatalf("%d runs in 200 ms, want at least %d", len(starts), len(work))
		}
		for k, at := range starts {
			grid := initial + time.Duration(k)*period
			due := grid
			if k > 0 {
				due = max(grid, ends[k-1])
			}
			if at < grid || (k > 0 && at < ends[k-1]) || at > due+s.tolerance {
				t.Errorf("run %d started at %v, want %v to %v (grid %v, previous run ended at %v)",
					k, at, due, due+s.tolerance, grid, ends[max(k-1, 0)])
			}
		}
		tm.Stop()
	})
}

// TestPeriodic_FixedDelay checks that each run of a fixed-delay timeout
// starts delay after the previous one ended.
func TestPeriodic_FixedDelay(t *testing.T) {
	setups := []setup{inlineOneShard, goroutinesOneShard, goroutinesShards}
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		const initial, delay = 5*ms + 300*µs, 10 * ms
		work := []time.Duration{0, 3 * ms, 25 * ms, 1500 * µs, 0}
		l := newRunLog(t)
		to := must(t)(tm.ScheduleWithFixedDelay(initial, delay, l.fn(func(k int) time.Duration {
			return work[k%len(work)]
		})))
		advance(300 * ms)
		if !to.Cancel() {
			t.Error("Cancel of a fixed-delay timeout = false, want true")
		}
		advance(100 * ms)
		starts, ends := l.runs()
		if len(starts) < 2*len(work) {
			t.Fatalf("%d runs in 300 ms, want at least %d", len(starts), 2*len(work))
		}
		s.checkOnTime(t, "first fixed-delay run", starts[0], initial)
		for k := 1; k < len(starts); k++ {
			s.checkOnTime(t, "fixed-delay run", starts[k], ends[k-1]+delay)
		}
		tm.Stop()
	})
}

// periodicKinds makes a periodic timeout of each kind, each first due at 1
// ms and then every 1 ms.
var periodicKinds = []struct {
	name string
	make func(tm *hourglass.Timer, f func()) (*hourglass.Timeout, error)
}{
	{"FixedRate", func(tm *hourglass.Timer, f func()) (*hourglass.Timeout, error) {
		return tm.ScheduleAtFixedRate(ms, ms, f)
	}},
	{"FixedDelay", func(tm *hourglass.Timer, f func()) (*hourglass.Timeout, error) {
		return tm.ScheduleWithFixedDelay(ms, ms, f)
	}},
	{"Schedule", func(tm *hourglass.Timer, f func()) (*hourglass.Timeout, error) { return tm.Schedule(every(ms), f) }},
}

// TestPeriodic_CancelFromRun checks that Cancel from inside a run returns
// true and no further run starts, and that Cancel then returns false.
func TestPeriodic_CancelFromRun(t *testing.T) {
	setups := []setup{inlineOneShard, goroutinesOneShard, inlineShards, goroutinesShards, poolOneShard}
	forEachSetup(t, setups, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		for _, kind := range periodicKinds {
			var self atomic.Pointer[hourglass.Timeout]
			var runs atomic.Int32
			var cancelled atomic.Bool
			to := must(t)(kind.make(tm, func() {
				if runs.Add(1) == 3 {
					cancelled.Store(self.Load().Cancel())
				}
			}))
			self.Store(to)
			advance(50 * ms)
			if n := runs.Load(); n != 3 || !cancelled.Load() {
				t.Errorf("%s: %d runs, Cancel in run 3 = %v; want 3 runs and true", kind.name, n, cancelled.Load())
			}
			if to.Cancel() || !to.Cancelled() || to.Expired() {
				t.Errorf("%s: after Cancel: Cancel() = true or Cancelled() = false or Expired() = true", kind.name)
			}
			if to.Reset(ms) {
				t.Errorf("%s: Reset of a cancelled periodic timeout = true, want false", kind.name)
			}
			advance(50 * ms)
			if n := runs.Load(); n != 3 {
				t.Errorf("%s: %d runs after Cancel and Reset, want none", kind.name, n-3)
			}
		}
		if n := tm.Pending(); n != 0 {
			t.Errorf("Pending() = %d after every periodic timeout was cancelled, want 0", n)
		}
		tm.Stop()
	})
}

// TestPeriodic_CancelInSameBatch checks that a periodic timeout cancelled
// by a callback due at the same tick, after the driver has taken both but
// before it reached the periodic one, does not run: Cancel returned true,
// so no run may start after it.
func TestPeriodic_CancelInSameBatch(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		for _, kind := range periodicKinds {
			var periodic atomic.Pointer[hourglass.Timeout]
			var runs atomic.Int32
			var cancelled atomic.Bool
			// Scheduled first, due at the same tick: with one shard it is
			// handed over first (the heap keeps no such order, so it may
			// come second there and then has nothing to cancel).
			must(t)(tm.AfterFunc(ms, func() { cancelled.Store(periodic.Load().Cancel()) }))
			periodic.Store(must(t)(kind.make(tm, func() { runs.Add(1) })))
			advance(20 * ms)
			switch n := runs.Load(); {
			case cancelled.Load() && n != 0:
				t.Errorf("%s: Cancel returned true, then %d runs started", kind.name, n)
			case !cancelled.Load() && n != 1:
				t.Errorf("%s: Cancel returned false before the run ended, %d runs", kind.name, n)
			case s.fifo && !cancelled.Load():
				t.Errorf("%s: Cancel from the earlier callback of the batch returned false", kind.name)
			}
			periodic.Load().Cancel()
		}
		tm.Stop()
	})
}

// TestPeriodic_CancelDuringRun checks Cancel from another goroutine while
// a run is in progress: the run finishes, no further run starts, and the
// timeout counts as pending until the Cancel.
func TestPeriodic_CancelDuringRun(t *testing.T) {
	forEachSetup(t, []setup{goroutinesOneShard, goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		l := newRunLog(t)
		to := must(t)(tm.ScheduleAtFixedRate(10*ms, 10*ms, l.fn(func(int) time.Duration { return 5 * ms })))
		advance(22 * ms) // the second run is in progress until 25 ms
		if n := tm.Pending(); n != 1 {
			t.Errorf("Pending() = %d during a run, want 1", n)
		}
		if to.Expired() || to.Cancelled() {
			t.Error("Expired() or Cancelled() = true during a run")
		}
		if got, want := to.Deadline(), l.start.Add(20*ms); !got.Equal(want) {
			t.Errorf("Deadline() during a run = %v, want %v (the run's)", got, want)
		}
		if !to.Cancel() {
			t.Error("Cancel during a run = false, want true")
		}
		if n := tm.Pending(); n != 0 {
			t.Errorf("Pending() = %d after Cancel, want 0", n)
		}
		advance(100 * ms)
		starts, ends := l.runs()
		if len(starts) != 2 || len(ends) != 2 {
			t.Errorf("%d runs started and %d ended, want 2 and 2", len(starts), len(ends))
		}
		tm.Stop()
	})
}

// TestPeriodic_Reset checks that Reset moves the next run of a periodic
// timeout and later runs follow from it.
func TestPeriodic_Reset(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard, goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		l := newRunLog(t)
		to := must(t)(tm.ScheduleAtFixedRate(10*ms, 10*ms, l.fn(noWork)))
		advance(15 * ms)
		if !to.Reset(2 * ms) {
			t.Error("Reset of a pending periodic timeout = false, want true")
		}
		advance(25 * ms) // runs at 10, 17, 27, 37 ms
		to.Cancel()
		starts, _ := l.runs()
		want := []time.Duration{10 * ms, 17 * ms, 27 * ms, 37 * ms}
		if len(starts) != len(want) {
			t.Fatalf("runs at %v, want %v", starts, want)
		}
		for k, at := range starts {
			s.checkOnTime(t, "periodic run", at, want[k])
		}
		tm.Stop()
	})
}

// TestPeriodic_ScheduleEnds checks a custom Schedule that ends after three
// runs: they come at the times it gives, then the timeout has expired.
func TestPeriodic_ScheduleEnds(t *testing.T) {
	forEachSetup(t, []setup{inlineOneShard, goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		tm := s.newTimer(t, opts...)
		r := newRecorder()
		sched := &countdown{every: 10 * time.Second, runs: 3}
		to := must(t)(tm.Schedule(sched, r.fn(0)))
		if got, want := to.Deadline(), r.start.Add(10*time.Second); !got.Equal(want) {
			t.Errorf("Deadline() = %v, want %v", got, want)
		}
		advance(time.Minute)
		at := r.at(0)
		if len(at) != 3 {
			t.Fatalf("runs at %v, want 3 runs", at)
		}
		for k, got := range at {
			s.checkOnTime(t, "scheduled run", got, time.Duration(k+1)*10*time.Second)
		}
		// Next was asked from each run's due time: the runs took no time.
		sched.mu.Lock()
		for k, c := range sched.calls {
			if want := r.start.Add(time.Duration(k) * 10 * time.Second); !c.Equal(want) {
				t.Errorf("Next call %d asked about %v, want %v", k, c, want)
			}
		}
		sched.mu.Unlock()
		if !to.Expired() || to.Cancelled() {
			t.Errorf("ended schedule: Expired() = %v, Cancelled() = %v, want true, false", to.Expired(), to.Cancelled())
		}
		if n := tm.Pending(); n != 0 {
			t.Errorf("Pending() = %d after the schedule ended, want 0", n)
		}
		if to.Cancel() || to.Reset(ms) {
			t.Error("Cancel or Reset of an ended schedule = true, want false")
		}
		advance(time.Minute)
		if n := len(r.at(0)); n != 3 {
			t.Errorf("%d runs after the schedule ended, want 0", n-3)
		}
		tm.Stop()
	})
}

// TestPeriodic_Cron checks that a Cron schedule runs on its times.
func TestPeriodic_Cron(t *testing.T) {
	forEachSetup(t, []setup{goroutinesShards}, func(t *testing.T, s structure, opts []hourglass.Option) {
		sched, err := hourglass.Cron("@every 1m")
		if err != nil {
			t.Fatal(err)
		}
		tm := s.newTimer(t, opts...)
		// A bubble's clock starts at midnight UTC, 2000-01-01: a whole
		// second, so @every 1m runs at whole minutes from here.
		r := newRecorder()
		to := must(t)(tm.Schedule(sched, r.fn(0)))
		const runs = 3
		advance(runs*time.Minute + s.tolerance)
		to.Cancel()
		at := r.at(0)
		if len(at) != runs {
			t.Fatalf("runs at %v, want %d", at, runs)
		}
		for k, got := range at {
			s.checkOnTime(t, "cron run", got, time.Duration(k+1)*time.Minute)
		}
		tm.Stop()
	})
}
