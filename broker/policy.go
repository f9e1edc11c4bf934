package broker

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// A queue's settings are its policy (task.Policy, applied through the
// rules of service/policy.go) and its pause. Both live in the queue's
// queueState, guarded by b.mu, and in one store.Queue record, written in
// the same group commit as the tasks' writes and loaded by recover; a
// queue with neither has no record. Where each part of a policy acts:
//
//   - put defaults: put (put.go), for every put and every occurrence of a
//     schedule;
//   - retry back-off and dead letter: fail (failure.go), at each failed
//     attempt (nack, bury, a lease that runs out);
//   - rate and concurrency, the queue's and per key (perkey.go): take
//     (reserve.go), at each reserve. A reserve
//     that meets a limit waits among the queue's waiters; it is woken when
//     a token is due (armRateLocked arms a timer for it) or when one of the
//     queue's tasks stops being reserved (queueState.count).
//
// A change of policy applies to the tasks already in the queue: at their
// next failure, and at the next reserve.

// SetQueue changes queue's settings as c says (service.Engine): its
// policy, checked and normalised by service.New, and its pause, in its
// record and one group commit, and returns its policy as recorded.
// Reservers waiting on the queue are woken, as new limits or a pause's
// end may let them take. A pause (task.PauseIndefinitely: until resumed;
// 0 ends one) counts in the queue's Pauses and survives a restart; puts
// go on, and ReserveJob, naming a task, still takes it (as beanstalkd's
// reserve-job does). The zero policy on a queue that has none changes
// nothing and makes no queue. O(the queue's parked reservers).
func (b *Broker) SetQueue(ctx context.Context, queue string, c service.QueueChange) (task.Policy, error) {
	var p task.Policy
	if c.Policy != nil {
		p = clonePolicy(*c.Policy)
	}
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return task.Policy{}, err
	}
	if c.Pause == nil && p.IsZero() {
		if q, ok := b.byName[queue]; !ok || q.policy.IsZero() {
			g := b.answerGroupLocked()
			b.mu.Unlock()
			return p, b.wait(ctx, g)
		}
	}
	q, err := b.queueForLocked(queue)
	if err != nil {
		b.mu.Unlock()
		return task.Policy{}, err
	}
	if c.Policy != nil {
		b.setPolicyLocked(q, p)
	}
	if c.Pause != nil {
		now := time.Now().UnixNano()
		q.pauses++
		b.pauseLocked(q, service.PausedUntil(now, *c.Pause), now)
		b.writeQueueLocked(q)
	}
	p = clonePolicy(q.policy)
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return p, b.wait(ctx, g)
}

// Policy returns queue's policy, the zero Policy when none was set. What
// it answers is durable.
func (b *Broker) Policy(ctx context.Context, queue string) (task.Policy, error) {
	b.mu.Lock()
	if err := b.usableLocked(); err != nil {
		b.mu.Unlock()
		return task.Policy{}, err
	}
	var p task.Policy
	if q, ok := b.byName[queue]; ok {
		p = clonePolicy(q.policy)
	}
	g := b.answerGroupLocked()
	b.mu.Unlock()
	return p, b.wait(ctx, g)
}

// setPolicyLocked makes p q's policy and writes q's record. The buckets
// of a rate that changed start full (service.Refills). b.mu must be held.
func (b *Broker) setPolicyLocked(q *queueState, p task.Policy) {
	rate, perKey := service.Refills(q.policy, p)
	if rate {
		q.bucket = service.Bucket{}
	}
	if perKey {
		b.dropKeyRatesLocked(q)
	}
	q.policy = p
	q.reparkAllLocked()
	b.writeQueueLocked(q)
	b.wakeReadyLocked(q)
}

// pauseLocked makes q paused until until (Unix ns; 0: not paused,
// math.MaxInt64: until resumed) and arms the timer that ends a finite
// pause. b.mu must be held.
func (b *Broker) pauseLocked(q *queueState, until, now int64) {
	if q.pauseEnd != nil {
		q.pauseEnd.Cancel()
		q.pauseEnd = nil
	}
	q.pausedUntil = until
	if until <= now {
		q.pausedUntil = 0
		b.wakeReadyLocked(q)
		return
	}
	if until == math.MaxInt64 {
		return
	}
	to, err := b.cron.AfterFunc(time.Duration(until-now), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q.pausedUntil == until {
			q.pausedUntil, q.pauseEnd = 0, nil
			b.wakeReadyLocked(q)
			b.emptiedOutLocked(q)
			b.tidyLocked()
		}
	})
	if err != nil {
		if !b.closed {
			b.log.Error("hourglass: arming the end of a pause", "queue", q.name, "err", err)
		}
		return
	}
	q.pauseEnd = to
}

// wakeReadyLocked wakes as many of q's waiters as can take q's ready tasks
// between them: its pause ended, its limits loosened, or a token is due.
// b.mu must be held.
func (b *Broker) wakeReadyLocked(q *queueState) {
	q.waiters.Wake(q.readyN)
}

// writeQueueLocked writes q's record into the open group: its policy, pause
// and rate limit's bucket, or a delete when it has neither policy nor
// pause (and q may then hold nothing: emptiedOutLocked). b.mu must be held.
func (b *Broker) writeQueueLocked(q *queueState) {
	g := b.open
	if q.policy.IsZero() && q.pausedUntil == 0 {
		g.batch.DeleteQueue(q.name)
		q.recSeq = 0
		b.emptiedOutLocked(q)
	} else {
		rec := store.Queue{Name: q.name, Policy: q.policy, PausedUntil: q.pausedUntil, Pauses: q.pauses}
		rec.Tokens, rec.TokensAt = b.bucketRecordLocked(q)
		q.recSeq, q.recOp = g.seq, len(g.batch.Ops)
		g.batch.PutQueue(rec)
	}
	b.last = g
	b.kickLocked()
}

// writeBucketLocked writes q's bucket, which a reserve took tokens from,
// into the open group, with the reservations it made: into q's record if
// the group writes it already (a group writes it once however many reserves
// it holds), else as a new write of the record. Only queues with a rate
// limit have a bucket to write. b.mu must be held. O(1) but for a new
// write, which copies q's policy.
func (b *Broker) writeBucketLocked(q *queueState) {
	if g := b.open; q.recSeq == g.seq {
		op := &g.batch.Ops[q.recOp]
		op.Queue.Tokens, op.Queue.TokensAt = b.bucketRecordLocked(q)
		return
	}
	b.writeQueueLocked(q)
}

// bucketRecordLocked returns q's bucket as its record keeps it: the tokens
// and when they were counted, Unix ns on the wall clock (0: never used,
// full). b.mu must be held.
func (b *Broker) bucketRecordLocked(q *queueState) (tokens float64, at int64) {
	if q.bucket.At == 0 {
		return 0, 0
	}
	now, mono := time.Now(), b.monoNow()
	return q.bucket.Tokens, max(now.UnixNano()-(mono-q.bucket.At), 1)
}

// restoreBucket returns the bucket of rate r that its record left with
// tokens at wall (Unix ns, 0: full), refilled for the wall-clock time
// since then, on the monotonic clock at mono (Broker.monoNow), wall now
// being now. A wall clock behind wall (stepped back) refills nothing, and
// tokens beyond r's burst (or not a number) are cut to it: a restart
// never gives more tokens than the rate allowed before it.
func restoreBucket(r task.Rate, tokens float64, wall, now, mono int64) service.Bucket {
	if wall == 0 {
		return service.Bucket{}
	}
	if !(tokens >= 0) {
		tokens = 0 // NaN or negative: no record of ours
	}
	bk := service.Bucket{Tokens: tokens, At: wall}
	bk.Take(r, max(now, wall), 0) // refill up to now; cut to the burst
	return service.Bucket{Tokens: bk.Tokens, At: mono}
}

// recoverQueuesLocked loads the queue records: policies, rate limits'
// buckets (restoreBucket), pauses still running (their ends armed) and
// pause counts. A record left with neither policy
// nor pause (a pause that ended while the broker was down, or by its
// timer) is deleted. b.mu must be held.
func (b *Broker) recoverQueuesLocked(now int64) error {
	recs, err := b.st.Queues()
	if err != nil {
		return err
	}
	for _, r := range recs {
		q := b.queueLocked(r.Name)
		q.policy = clonePolicy(r.Policy)
		q.pauses = r.Pauses
		if rate := q.policy.Rate; rate != nil {
			q.bucket = restoreBucket(*rate, r.Tokens, r.TokensAt, now, b.monoNow())
		}
		if rate := perKeyRate(q.policy); rate != nil {
			b.restoreKeyRatesLocked(q, *rate, r.KeyBuckets, now)
		}
		b.pauseLocked(q, r.PausedUntil, now)
		if q.pausedUntil == 0 && q.policy.IsZero() {
			b.writeQueueLocked(q)
		}
	}
	return nil
}

// fullLocked reports whether q has as many of its tasks reserved as its
// concurrency limit allows. b.mu must be held.
func (q *queueState) fullLocked() bool {
	c := q.policy.Concurrency
	return c > 0 && q.reserved >= c
}

// armRateLocked arms the timer that wakes q's waiters when the next token
// of its rate limit is due, next from now, unless one is armed for then or
// earlier; now is Broker.monoNow's. b.mu must be held.
func (b *Broker) armRateLocked(q *queueState, now int64, next time.Duration) {
	at := now + int64(next)
	if q.rateWake != nil {
		if q.rateAt <= at {
			return
		}
		q.rateWake.Cancel()
		q.rateWake = nil
	}
	to, err := b.cron.AfterFunc(next, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q.rateAt != at {
			return // replaced by an earlier one
		}
		q.rateWake, q.rateAt = nil, 0
		b.wakeReadyLocked(q)
	})
	if err != nil {
		return // stopped: the broker is closing
	}
	q.rateWake, q.rateAt = to, at
}

// clonePolicy returns p with its Retry, Rate and PerKey copied, so that neither
// the caller's policy nor the broker's is shared.
func clonePolicy(p task.Policy) task.Policy {
	if p.Retry != nil {
		r := *p.Retry
		p.Retry = &r
	}
	if p.Rate != nil {
		r := *p.Rate
		p.Rate = &r
	}
	if k := p.PerKey; k != nil {
		c := *k
		if c.Rate != nil {
			r := *c.Rate
			c.Rate = &r
		}
		p.PerKey = &c
	}
	return p
}

// perKeyRate returns p's per-key rate, nil when it has none.
func perKeyRate(p task.Policy) *task.Rate {
	if p.PerKey == nil {
		return nil
	}
	return p.PerKey.Rate
}

// monoNow is the time in ns on the monotonic clock since b was opened,
// always above 0 (a service.Bucket at 0 was never used), or on
// Config.RateClock when one is set. A rate limit's bucket and its wake
// timer use it: a step of the wall clock neither fills nor drains a
// bucket.
func (b *Broker) monoNow() int64 {
	if c := b.cfg.RateClock; c != nil {
		return c.now() + 1
	}
	return int64(time.Since(b.opened)) + 1
}

// RateClock is a clock of the rate limits' buckets that moves only when
// told (Config.RateClock), so that a test sees a bucket refill without
// waiting: the queue's rate and the per-key rates read it, and their
// timers (the wake of a queue's waiters at its next token, a per-key
// bucket's next token and fullness) fire when Advance passes their
// moment. Everything else of the broker (due times, leases, pauses)
// stays on the real clocks. One RateClock may serve brokers opened one
// after the other on the same store, which then go on from its time. Safe
// for concurrent use.
type RateClock struct {
	mu sync.Mutex
	// at is the clock's time since its start; moved are the brokers told
	// of each move (rateClockMoved), each until it answers false.
	at    time.Duration
	moved []func() bool
}

// Advance moves c forward by d (> 0) and runs every timer of the brokers
// on c that is due by then, before it returns. O(queues and per-key
// buckets of those brokers).
func (c *RateClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.at += max(d, 0)
	moved := c.moved
	c.mu.Unlock()
	var kept []func() bool
	for _, f := range moved {
		if f() {
			kept = append(kept, f)
		}
	}
	c.mu.Lock()
	// Brokers opened meanwhile were appended after moved.
	c.moved = append(kept, c.moved[len(moved):]...)
	c.mu.Unlock()
}

// now returns c's time in ns.
func (c *RateClock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.at)
}

// onMove makes Advance call f after each move, until f answers false.
func (c *RateClock) onMove(f func() bool) {
	c.mu.Lock()
	c.moved = append(c.moved, f)
	c.mu.Unlock()
}

// rateClockMoved runs the rate timers of b that Config.RateClock's move
// made due, as their wheel would at their moment: it wakes the waiters of
// a queue whose next token is due, and brings back a key's lane parked
// for its bucket (keyRateDueLocked). It answers false once b is closed.
// O(queues and per-key buckets).
func (b *Broker) rateClockMoved() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	mono := b.monoNow()
	for _, q := range b.queues {
		if q == nil {
			continue
		}
		if q.rateWake != nil && q.rateAt <= mono {
			q.rateWake.Cancel()
			q.rateWake, q.rateAt = nil, 0
			b.wakeReadyLocked(q)
		}
		for key, kr := range q.keyRates {
			if kr.wake != nil && kr.wakeAt <= mono {
				kr.wake.Cancel()
				kr.wake, kr.wakeAt = nil, 0
				b.keyRateDueLocked(q, key, kr)
			}
		}
	}
	return true
}
