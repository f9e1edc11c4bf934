package broker

import (
	"cmp"
	"slices"
	"time"

	"github.com/hourglass-go/hourglass"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/task"
)

// A rate per key (issue 42, task.PerKey's Rate) on the embedded engine.
// A queue keeps a token bucket (service.Bucket, on Broker.monoNow's
// clock) for each key that took a token recently, in
// queueState.keyRates, and only while it is needed: a full bucket is the
// same as no bucket, so each bucket has one timer (hourglass.Timeout on
// the broker's cron timer) armed at the moment it is full again, which
// drops it. The number of buckets is so bounded by the keys handed out
// within one burst's refill time (Burst × Per / Limit), whatever the
// number of keys clients name; a key never reserved costs nothing, one
// with a bucket about 190 bytes (its keyRate, map entry and timer:
// TestKeyRate_Memory).
//
// A key whose bucket has no whole token when a reserve reaches its lane
// leaves the round: its lane is parked (perkey.go), as a key at its
// per-key concurrency is, and the bucket's timer is armed for its next
// token instead. The reserve goes on to the next key in O(log k): it
// neither spins on the key nor holds other keys up. When the timer fires
// the lane comes back at its key's place after the cursor (fair.go;
// unless its key is at its
// concurrency, whose end of a reservation brings it back) and one waiting
// reserver is woken; the timer is then armed again for the moment the
// bucket is full.
//
// Example: per_key.rate 1/s (burst 1); key A with 10 ready, key B with
// 10 and no rate spent. A reserve of 10 takes A1, B1 (B's bucket is then
// spent too) and parks A's and B's lanes: 2 tasks. At +1 s both timers
// fire, both lanes come back, the next reserve takes A2 and B2.
//
// Durability: the buckets live in memory while the broker runs, and are
// written once, when it closes, into their queue's record (its trailer
// of key buckets, store.Queue.KeyBuckets; at most maxKeptKeyBuckets a
// queue, the emptiest), in the last group Close commits;
// recoverQueuesLocked restores them, refilled for the wall-clock time
// since. So a clean restart lets no burst through, as a cluster, whose
// buckets are rows, does not. A crash loses the buckets spent since the
// last clean close (those read back from that close's record are refilled
// since): at most one burst per key more goes through after a crash.
// Writing the buckets with every reservation, as the queue-wide bucket is,
// would rewrite up to every key's bucket in each group; the write cost is
// instead one record of O(keys with a bucket) at close.

// maxKeptKeyBuckets bounds the per-key buckets a queue's record keeps
// at close (about 18 bytes and the key each): past it, the fullest are
// left out, to start full after the restart.
const maxKeptKeyBuckets = 100_000

// keyRate is one key's bucket of a queue's per-key rate.
type keyRate struct {
	bucket service.Bucket
	// wake fires at wakeAt (monoNow): at the key's next token while its
	// lane is parked for the rate (spent), else when the bucket is full.
	wake   *hourglass.Timeout
	wakeAt int64
	// spent: the key's lane was parked because the bucket had no token;
	// only wake brings it back.
	spent bool
}

// keyHeldLocked reports whether key, whose lane is first in q's order, may
// not be handed a task now (mono, Broker.monoNow): at its per-key
// concurrency, or without a token of its per-key rate, in which case the
// bucket's timer is armed for the next token. The caller parks the lane.
// q.policy.PerKey is not nil. b.mu must be held. O(1).
func (b *Broker) keyHeldLocked(q *queueState, key string, mono int64) bool {
	if q.keyFullLocked(key) {
		return true
	}
	r := q.policy.PerKey.Rate
	if r == nil {
		return false
	}
	kr := q.keyRates[key]
	if kr == nil {
		return false // full
	}
	probe := kr.bucket
	took, next := probe.Take(*r, mono, 1)
	if took > 0 {
		return false
	}
	kr.spent = true
	b.armKeyRateLocked(q, key, kr, mono+int64(next))
	return true
}

// takeKeyTokenLocked takes a token of key's per-key rate in q at mono,
// which keyHeldLocked found, making the key's bucket if it had none. b.mu
// must be held. O(1) but for arming a new bucket's timer.
func (b *Broker) takeKeyTokenLocked(q *queueState, key string, mono int64) {
	r := q.policy.PerKey.Rate
	if r == nil {
		return
	}
	kr := q.keyRates[key]
	if kr == nil {
		if q.keyRates == nil {
			q.keyRates = make(map[string]*keyRate)
		}
		kr = &keyRate{}
		q.keyRates[key] = kr
	}
	kr.bucket.Take(*r, mono, 1)
	if kr.wake == nil {
		b.armKeyRateLocked(q, key, kr, mono+int64(fullIn(*r, kr.bucket)))
	}
}

// fullIn returns how long until bk, a bucket of rate r, is full.
func fullIn(r task.Rate, bk service.Bucket) time.Duration {
	burst := r.Burst
	if burst == 0 {
		burst = r.Limit
	}
	missing := float64(burst) - bk.Tokens
	if missing <= 0 {
		return 1
	}
	return time.Duration(missing*float64(r.Per)/float64(r.Limit)) + 1
}

// armKeyRateLocked arms kr's timer at at (monoNow), unless it is armed for
// then or earlier. b.mu must be held.
func (b *Broker) armKeyRateLocked(q *queueState, key string, kr *keyRate, at int64) {
	if kr.wake != nil {
		if kr.wakeAt <= at {
			return
		}
		kr.wake.Cancel()
		kr.wake = nil
	}
	d := time.Duration(at - b.monoNow())
	if d < time.Millisecond {
		d = time.Millisecond
	}
	to, err := b.cron.AfterFunc(d, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q.keyRates[key] != kr || kr.wakeAt != at {
			return // dropped, or replaced by an earlier one
		}
		kr.wake, kr.wakeAt = nil, 0
		b.keyRateDueLocked(q, key, kr)
	})
	if err != nil {
		return // stopped: the broker is closing
	}
	kr.wake, kr.wakeAt = to, at
}

// keyRateDueLocked is kr's timer: it brings back key's lane parked for the
// rate once a token is there (and the key is below its concurrency),
// waking a waiter, drops the bucket once it is full, and arms the timer
// again otherwise. b.mu must be held.
func (b *Broker) keyRateDueLocked(q *queueState, key string, kr *keyRate) {
	k := q.policy.PerKey
	if k == nil || k.Rate == nil {
		b.dropKeyRateLocked(q, key)
		return
	}
	mono := b.monoNow()
	probe := kr.bucket
	probe.Take(*k.Rate, mono, 0) // refilled to now
	if kr.spent {
		if probe.Tokens < 1 {
			next := time.Duration((1-probe.Tokens)*float64(k.Rate.Per)/float64(k.Rate.Limit)) + 1
			b.armKeyRateLocked(q, key, kr, mono+int64(next))
			return
		}
		kr.spent = false
		if l := q.ready.lane(key); l != nil && l.parked && !q.keyFullLocked(key) {
			q.ready.unpark(l)
			q.waiters.Wake(1)
		}
	}
	if in := fullIn(*k.Rate, probe); in <= 1 {
		b.dropKeyRateLocked(q, key)
	} else {
		b.armKeyRateLocked(q, key, kr, mono+int64(in))
	}
}

// dropKeyRateLocked forgets key's bucket in q, which is full or no longer
// used, bringing back its lane if the bucket held it parked. b.mu must be
// held.
func (b *Broker) dropKeyRateLocked(q *queueState, key string) {
	kr := q.keyRates[key]
	if kr == nil {
		return
	}
	if kr.wake != nil {
		kr.wake.Cancel()
	}
	delete(q.keyRates, key)
	if len(q.keyRates) == 0 {
		q.keyRates = nil // give back the map of a burst of keys
	}
	if kr.spent {
		if l := q.ready.lane(key); l != nil && l.parked && !q.keyFullLocked(key) {
			q.ready.unpark(l)
			q.waiters.Wake(1)
		}
	}
}

// dropKeyRatesLocked forgets every per-key bucket of q: its per-key rate
// changed or went. b.mu must be held. O(keys with a bucket).
func (b *Broker) dropKeyRatesLocked(q *queueState) {
	for _, kr := range q.keyRates {
		if kr.wake != nil {
			kr.wake.Cancel()
		}
	}
	q.keyRates = nil
}

// rateSpentKeyLocked reports whether key's lane in q is parked waiting for
// a token of its per-key rate. b.mu must be held.
func (q *queueState) rateSpentKeyLocked(key string) bool {
	kr := q.keyRates[key]
	return kr != nil && kr.spent
}

// keepKeyRatesLocked writes into the open group the record of each queue
// that has per-key buckets, with them (at most maxKeptKeyBuckets a queue,
// the emptiest): Close's last writes. b.mu must be held. O(b log b) for b
// buckets.
func (b *Broker) keepKeyRatesLocked() {
	now, mono := time.Now(), b.monoNow()
	for _, q := range b.queues {
		if q == nil || len(q.keyRates) == 0 || perKeyRate(q.policy) == nil {
			continue
		}
		kept := make([]store.KeyBucket, 0, len(q.keyRates))
		for key, kr := range q.keyRates {
			at := max(now.UnixNano()-(mono-kr.bucket.At), 1)
			kept = append(kept, store.KeyBucket{Key: key, Tokens: kr.bucket.Tokens, At: at})
		}
		if len(kept) > maxKeptKeyBuckets {
			slices.SortFunc(kept, func(a, b store.KeyBucket) int { return cmp.Compare(a.Tokens, b.Tokens) })
			kept = kept[:maxKeptKeyBuckets]
		}
		b.writeQueueLocked(q)
		if g := b.open; q.recSeq == g.seq {
			g.batch.Ops[q.recOp].Queue.KeyBuckets = kept
		}
	}
}

// restoreKeyRatesLocked makes q's per-key buckets, of rate r, from those
// its record kept (keepKeyRatesLocked), refilled for the wall-clock time
// since they were written (restoreBucket); those full by now are left out.
// now is the wall clock, Unix ns. b.mu must be held. O(len(kept)).
func (b *Broker) restoreKeyRatesLocked(q *queueState, r task.Rate, kept []store.KeyBucket, now int64) {
	for _, k := range kept {
		mono := b.monoNow()
		bk := restoreBucket(r, k.Tokens, k.At, now, mono)
		in := fullIn(r, bk)
		if bk.At == 0 || in <= 1 {
			continue
		}
		if q.keyRates == nil {
			q.keyRates = make(map[string]*keyRate)
		}
		kr := &keyRate{bucket: bk}
		q.keyRates[k.Key] = kr
		b.armKeyRateLocked(q, k.Key, kr, mono+int64(in))
	}
}
