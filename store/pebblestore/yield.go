package pebblestore

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// yieldingScheduler schedules Pebble's compactions as Pebble's default
// scheduler does, and makes every compaction it grants step aside for the
// goroutines waiting to run at each progress report Pebble makes: every
// 128 keys a compaction writes, and every block its writer goroutine
// finishes.
//
// Why: a compaction is a loop of CPU work (merging, encoding, compressing)
// that blocks on nothing but fast writes to the page cache, so Go's
// scheduler lets it keep its P until the 10 ms preemption. The timers of
// that P, the delay wheel's among them, run only when it schedules again
// (or when another P runs dry and steals them), so on two cores a task
// could fall due up to 10 ms late while a compaction ran. A yield is
// cheap next to the compaction work between two progress reports.
//
// Scheduling, as Pebble's ConcurrencyLimitScheduler (not exported): grant
// a compaction whenever fewer run than Pebble allows without permission
// (DBForCompaction.GetAllowedWithoutPermission, which grows with its
// backlog); look again when one ends, when Pebble says the allowance may
// have grown, and every 100 ms. Lock order, as the CompactionScheduler
// interface requires: Pebble's mutex before ours, so ours is never held
// while calling into Pebble except GetAllowedWithoutPermission, which
// takes none of Pebble's.
type yieldingScheduler struct {
	poke chan struct{} // buffered 1: look again now
	stop chan struct{} // closed by Unregister
	done chan struct{} // closed when the granter has returned

	yields atomic.Int64 // how many times a compaction stepped aside, for the tests

	mu           sync.Mutex
	db           pebble.DBForCompaction // set by Register, before the granter starts
	running      int                    // compactions granted and not done
	held         bool                   // grant nothing: see Store.releaseCompactions
	unregistered bool
}

var _ pebble.CompactionScheduler = (*yieldingScheduler)(nil)

// newYieldingScheduler returns a scheduler that holds every compaction
// until release is called.
func newYieldingScheduler() *yieldingScheduler {
	return &yieldingScheduler{poke: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), held: true}
}

// Register starts the granter.
func (s *yieldingScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.mu.Lock()
	s.db = db
	s.mu.Unlock()
	go s.granter()
}

// Unregister stops the granter, if Register started it, and waits for
// it: no grant follows. A second call does nothing. Open calls it too
// when Pebble's Open fails, which may be after Register, and Pebble then
// never does.
func (s *yieldingScheduler) Unregister() {
	s.mu.Lock()
	started := s.db != nil && !s.unregistered
	s.unregistered = true
	s.mu.Unlock()
	if started {
		close(s.stop)
		<-s.done
	}
}

// TrySchedule grants a compaction Pebble wants to start, if fewer run
// than it allows.
func (s *yieldingScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unregistered || s.held || s.running >= s.db.GetAllowedWithoutPermission() {
		return false, nil
	}
	s.running++
	return true, yieldingGrant{s}
}

// UpdateGetAllowedWithoutPermission has the granter look again.
func (s *yieldingScheduler) UpdateGetAllowedWithoutPermission() { s.wake() }

func (s *yieldingScheduler) wake() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// granter is the one goroutine that grants compactions Pebble is waiting
// to run, so that grants never race each other.
func (s *yieldingScheduler) granter() {
	defer close(s.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		case <-s.poke:
		}
		s.grant()
	}
}

// grant starts waiting compactions while fewer run than Pebble allows.
// A grant is counted before Pebble is asked, under the same lock as the
// check, so that TrySchedule meanwhile cannot take the same place.
func (s *yieldingScheduler) grant() {
	for {
		s.mu.Lock()
		ok := !s.unregistered && !s.held && s.running < s.db.GetAllowedWithoutPermission()
		if ok {
			s.running++
		}
		s.mu.Unlock()
		if !ok {
			return
		}
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting || !s.db.Schedule(yieldingGrant{s}) {
			s.done1()
			return
		}
	}
}

// release lets compactions be granted again after newYieldingScheduler's
// hold, and looks for waiting ones. Calls after the first do nothing.
func (s *yieldingScheduler) release() {
	s.mu.Lock()
	held := s.held
	s.held = false
	s.mu.Unlock()
	if held {
		s.wake()
	}
}

// done1 records the end of a granted compaction.
func (s *yieldingScheduler) done1() {
	s.mu.Lock()
	s.running--
	s.mu.Unlock()
}

// yieldingGrant is the handle of one granted compaction.
type yieldingGrant struct{ s *yieldingScheduler }

func (yieldingGrant) Started() {}

// MeasureCPU is Pebble's report from a compaction goroutine, every few
// blocks of work: the place to step aside.
func (g yieldingGrant) MeasureCPU(pebble.CompactionGoroutineKind) {
	g.s.yields.Add(1)
	runtime.Gosched()
}

// CumulativeStats is Pebble's report every 128 keys; MeasureCPU follows
// it, and yields.
func (yieldingGrant) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done records the compaction's end and looks for the next.
func (g yieldingGrant) Done() {
	g.s.done1()
	g.s.wake()
}
