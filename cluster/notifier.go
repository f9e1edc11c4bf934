package cluster

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxPayload bounds one notification's payload (PostgreSQL's limit is
// 8000 bytes).
const maxPayload = 7900

// notifier sends the node's notifications after the writes they announce
// have committed, in batches: while one batch is being sent the next
// fills. A batch is one statement, a transaction of its own with
// synchronous_commit off,
// for two reasons. PostgreSQL serialises the commits of transactions that
// NOTIFY under one lock, held through the commit's WAL flush: a NOTIFY in
// every put would cost every put a flush of its own. And a notification
// promises nothing: it only shortens a wait. A notification lost in a
// crash delays a task until the owner's sweep of overdue timers (one
// lease tick) and loses nothing.
type notifier struct {
	db   *pool
	name string // the node's, in the payloads of chanReady
	log  *slog.Logger
	kick chan struct{}
	done chan struct{}
	quit chan struct{}

	// linger is how long a timer announced with timerLater may wait for
	// the next batch (notifyLinger).
	linger time.Duration
	// lazy: a timer was queued in later while none was; run then arms its
	// linger.
	lazy chan struct{}
	// sent counts the statements sent, for tests.
	sent atomic.Int64

	mu sync.Mutex
	// later: partition channel → timers far enough ahead to wait for
	// the next batch, sent with it or linger after the first of them was
	// queued, unless their job was dropped from laterJobs meanwhile
	// (cancelLater). Guarded by mu.
	later     map[string][]lazyTimer
	laterJobs map[uint64]struct{}
	// timers: partition channel → lines "JOB FIRE_AT"; ready: queue →
	// tasks made ready (sent on chanReady as "K QUEUE NODE"), or
	// lookAgain ("all QUEUE NODE"); other: anything else. Guarded by mu.
	timers map[string][]string
	ready  map[string]int
	other  [][2]string
	// readySince: queue → when the first of ready's tasks was announced,
	// for the hop flushed → notified. Guarded by mu.
	readySince map[string]time.Time
	// hop observes that hop per task (metrics.hopNotified); nil: none.
	hop prometheus.Observer
}

// lookAgain, as a count of notifier.ready, has every reserver of the
// queue look again.
const lookAgain = -1

// notifyLinger is how long the announcement of a timer due at least
// lazyAhead ahead (a lease's end, a TTR away) may wait to share a
// statement: at three nodes every reserve leased tasks on the others'
// partitions, and their announcements cost a statement a reserve. The
// owner only needs the timer before it fires; a notification lost
// meanwhile (a crash) is caught by the owner's sweep, as any other.
const (
	notifyLinger = 100 * time.Millisecond
	lazyAhead    = 10 * notifyLinger
)

// newNotifier starts a notifier sending on db for the node name.
func newNotifier(db *pool, name string, log *slog.Logger, hop prometheus.Observer) *notifier {
	return newNotifierLinger(db, name, log, hop, notifyLinger)
}

// newNotifierLinger is newNotifier with timerLater's linger.
func newNotifierLinger(db *pool, name string, log *slog.Logger, hop prometheus.Observer, linger time.Duration) *notifier {
	nt := &notifier{
		db: db, name: name, log: log, kick: make(chan struct{}, 1), done: make(chan struct{}), quit: make(chan struct{}),
		linger: linger, lazy: make(chan struct{}, 1), later: make(map[string][]lazyTimer), laterJobs: make(map[uint64]struct{}),
		timers: make(map[string][]string), ready: make(map[string]int), readySince: make(map[string]time.Time), hop: hop,
	}
	go nt.run()
	return nt
}

// timer announces to partition p's owner that job fires at (database
// ns).
func (nt *notifier) timer(p int, job uint64, at int64) {
	ch := partitionChannel(p)
	nt.mu.Lock()
	nt.timers[ch] = append(nt.timers[ch], strconv.FormatUint(job, 10)+" "+strconv.FormatInt(at, 10))
	nt.mu.Unlock()
	nt.wake()
}

// timerLater is timer for a timer that fires at least lazyAhead after
// now (both database ns): it goes with the next batch sent, at the
// latest linger after the first such timer was queued.
func (nt *notifier) timerLater(p int, job uint64, at, now int64) {
	if at-now < int64(lazyAhead) {
		nt.timer(p, job, at)
		return
	}
	ch := partitionChannel(p)
	nt.mu.Lock()
	first := len(nt.later) == 0
	nt.later[ch] = append(nt.later[ch], lazyTimer{job, at})
	nt.laterJobs[job] = struct{}{}
	nt.mu.Unlock()
	if first {
		select {
		case nt.lazy <- struct{}{}:
		default:
		}
	}
}

// lazyTimer is a timer queued by timerLater: its job and when it fires
// (database ns).
type lazyTimer struct {
	job uint64
	at  int64
}

// cancelLater drops the announcements of jobs' timers still waiting in
// later: their tasks are gone (acked), so their owner would arm timers
// that fire into a flush for nothing. One announced already stays
// announced. O(len(jobs)).
func (nt *notifier) cancelLater(jobs []int64) {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if len(nt.laterJobs) == 0 {
		return
	}
	for _, j := range jobs {
		delete(nt.laterJobs, uint64(j))
	}
}

// readyIn announces k tasks made ready in queue (lookAgain: every
// reserver of queue is to look again, which covers any count).
func (nt *notifier) readyIn(queue string, k int) {
	now := time.Now()
	nt.mu.Lock()
	if _, ok := nt.readySince[queue]; !ok {
		nt.readySince[queue] = now
	}
	if n := nt.ready[queue]; n != lookAgain {
		if k == lookAgain {
			nt.ready[queue] = lookAgain
		} else {
			nt.ready[queue] = n + k
		}
	}
	nt.mu.Unlock()
	nt.wake()
}

// send sends payload on channel.
func (nt *notifier) send(channel, payload string) {
	nt.mu.Lock()
	nt.other = append(nt.other, [2]string{channel, payload})
	nt.mu.Unlock()
	nt.wake()
}

func (nt *notifier) wake() {
	select {
	case nt.kick <- struct{}{}:
	default:
	}
}

// close sends what is pending and stops.
func (nt *notifier) close() {
	select {
	case <-nt.quit:
	default:
		close(nt.quit)
	}
	<-nt.done
}

func (nt *notifier) run() {
	defer close(nt.done)
	linger := time.NewTimer(nt.linger)
	linger.Stop()
	defer linger.Stop()
	for {
		select {
		case <-nt.kick:
			nt.flush(false)
		case <-nt.lazy:
			// A flush before it fires sends the timers queued; the
			// linger then finds none, or the next ones.
			linger.Reset(nt.linger)
		case <-linger.C:
			nt.flush(true)
		case <-nt.quit:
			nt.flush(true)
			return
		}
	}
}

// flush sends everything pending in one transaction: the timers that
// may wait (later) go with anything else, or alone when lingered is
// set (their linger is over).
func (nt *notifier) flush(lingered bool) {
	nt.mu.Lock()
	timers, ready, other, since, later := nt.timers, nt.ready, nt.other, nt.readySince, nt.later
	if len(timers) == 0 && len(ready) == 0 && len(other) == 0 && (!lingered || len(later) == 0) {
		nt.mu.Unlock()
		return
	}
	nt.timers, nt.ready, nt.other = make(map[string][]string), make(map[string]int), nil
	if len(later) > 0 {
		for ch, lts := range later {
			for _, lt := range lts {
				if _, ok := nt.laterJobs[lt.job]; ok {
					timers[ch] = append(timers[ch], strconv.FormatUint(lt.job, 10)+" "+strconv.FormatInt(lt.at, 10))
				}
			}
		}
		nt.later, nt.laterJobs = make(map[string][]lazyTimer), make(map[uint64]struct{})
	}
	if len(since) > 0 {
		nt.readySince = make(map[string]time.Time)
	}
	nt.mu.Unlock()

	var chans, payloads []string
	for ch, lines := range timers {
		chans, payloads = joinLines(chans, payloads, ch, lines)
	}
	if len(ready) > 0 {
		lines := make([]string, 0, len(ready))
		for q, k := range ready {
			count := "all"
			if k != lookAgain {
				count = strconv.Itoa(k)
			}
			lines = append(lines, count+" "+q+" "+nt.name)
		}
		chans, payloads = joinLines(chans, payloads, chanReady, lines)
	}
	for _, m := range other {
		chans, payloads = append(chans, m[0]), append(payloads, m[1])
	}
	if len(chans) == 0 {
		return // the timers lingering were all cancelled (cancelLater)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// One statement, so one transaction; set_config(..., true) is SET
	// LOCAL, read at the commit.
	if _, err := nt.db.Exec(ctx, sqlNotify, chans, payloads); err != nil {
		nt.log.Warn("hourglass: sending notifications failed; owners' sweeps will catch up", "err", err)
		return
	}
	nt.sent.Add(1)
	if nt.hop != nil {
		now := time.Now()
		for q, k := range ready {
			d := now.Sub(since[q]).Seconds()
			for range max(k, 1) {
				nt.hop.Observe(d)
			}
		}
	}
}

// joinLines appends to chans and payloads the notifications on ch that
// carry lines, one a line, as few as maxPayload allows. O(len(lines)).
func joinLines(chans, payloads []string, ch string, lines []string) ([]string, []string) {
	var b strings.Builder
	for _, line := range lines {
		if b.Len() > 0 && b.Len()+len(line)+1 > maxPayload {
			chans, payloads = append(chans, ch), append(payloads, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	return append(chans, ch), append(payloads, b.String())
}

// sqlNotify sends the notifications $2 on the channels $1, with
// synchronous_commit off: one statement, so one transaction, and
// set_config(..., true) is SET LOCAL, read at the commit.
const sqlNotify = `SELECT count(pg_notify(c, p)), max(set_config('synchronous_commit', 'off', true))
		FROM unnest($1::text[], $2::text[]) AS m(c, p)`
