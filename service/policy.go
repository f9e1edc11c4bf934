package service

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/hourglass-go/hourglass/task"
)

// A queue's policy (task.Policy) is applied by both engines through the
// functions of this file, so that the rules are written once:
//
//   - CheckPolicy refuses a bad policy, naming the field, before anything
//     is written.
//   - ApplyDefaults fills a put's ttr and max_attempts from the policy,
//     then from the server's ttr and DefaultMaxAttempts when neither
//     gives one (MaxAttempts). The cluster's put statement applies the
//     same precedence in SQL to the policy it reads, with these
//     constants passed from Go (cluster/put.go, sqlInsert).
//   - AfterFailure decides what becomes of a reserved task that failed (a
//     nack, a lease that ran out, a bury): ready again after a delay, or
//     dead, and then moved to a dead-letter queue or not. A nack without
//     a delay of its own (a failed push is one) follows the policy's
//     back-off, DefaultRetry when it has none (ExpiryDelay says what a
//     lease that ran out follows).
//   - Effective is the policy as the engines apply it, defaults filled
//     in: what GET .../policy shows beside the policy recorded.
//   - Bucket is the rate limit's token bucket; the embedded engine keeps
//     one per queue in memory and in the queue's record, written with the
//     reservations that took its tokens, the cluster one per queue in a
//     row, read and written under a row lock by each reserve. On both a
//     restart keeps the tokens; a new rate starts with a full bucket.
//     A per-key rate (PerKey.Rate) is a Bucket per key, kept only while
//     it is not full (a full bucket is the same as none): the embedded
//     engine's in memory, written into the queue's record when it closes
//     (broker/keyrate.go), so that a clean restart keeps them and a crash
//     lets at most one burst per key more through; the cluster's in a
//     row per key under the queue's row lock (cluster/limits.go), which
//     every restart keeps. A key without a token leaves the turn order until
//     its next token; the queue-wide limits hold beside it.
//
// The defaults stop a failing task from coming back at once, forever:
// without them a nack without a delay, or a push answered 500, handed
// the task out again within milliseconds, each time a durable write and
// an attempt record. A policy asks for immediate retries with a retry of
// initial 0s, and for unlimited attempts with max_attempts
// task.UnlimitedAttempts; both are recorded as given, and a policy
// recorded before these fields existed reads as "defaults apply" on both
// engines (a nil Retry, a MaxAttempts of 0).
//
// A worked example. Policy {Retry: {Initial: 1s, Max: 1m, Multiplier: 2,
// Jitter: 0.1}, MaxAttempts: 5, DeadLetter: "mail-dead"}: a task of the
// queue reserved for the first time (attempts 1) and nacked without a
// delay comes back after 1 s × [0.9, 1.1]; after its second attempt
// 2 s × [0.9, 1.1], then 4 s, 8 s; its fifth failure finds its attempts
// used up, and it moves to queue "mail-dead", ready, with the last error
// kept and, as a task put there, attempts 0 and the max_attempts and ttr
// of mail-dead's policy (DeadLettered). A nack with a delay of the caller's, or a
// beanstalkd release, keeps that delay and still counts against
// MaxAttempts (a release over HTTP does not count: Release).

// CheckPolicy returns an error wrapping task.ErrInvalid that names the
// field if p is not a valid policy for queue.
func CheckPolicy(queue string, p task.Policy) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: policy: %s", task.ErrInvalid, fmt.Sprintf(format, args...))
	}
	if r := p.Retry; r != nil {
		switch {
		case r.Initial < 0 || r.Initial > task.MaxRetryDelay:
			return bad("retry.initial %s out of range 0s..%s (0s: retry at once)", r.Initial, task.MaxRetryDelay)
		case r.Initial == 0 && r.Max != 0:
			return bad("retry.max %s with retry.initial 0s (retry at once): give 0s or leave it out", r.Max)
		case r.Max < r.Initial || r.Max > task.MaxRetryDelay:
			return bad("retry.max %s out of range: give retry.initial (%s) or more, at most %s", r.Max, r.Initial, task.MaxRetryDelay)
		case r.Initial == 0 && r.Multiplier == 0:
			// Immediate retries need no multiplier.
		case !(r.Multiplier >= 1 && r.Multiplier <= task.MaxMultiplier):
			return bad("retry.multiplier %g out of range 1..%d", r.Multiplier, task.MaxMultiplier)
		}
		if !(r.Jitter >= 0 && r.Jitter <= 1) {
			return bad("retry.jitter %g out of range 0..1", r.Jitter)
		}
	}
	if p.MaxAttempts < task.UnlimitedAttempts || int64(p.MaxAttempts) > task.MaxAttemptsLimit {
		return bad("max_attempts %d out of range: give 1..%d, %d for no limit, or 0 (leave it out) for the default %d",
			p.MaxAttempts, int64(task.MaxAttemptsLimit), task.UnlimitedAttempts, DefaultMaxAttempts)
	}
	if p.TTR < 0 || p.TTR > MaxTTR || p.TTR > 0 && p.TTR < time.Millisecond {
		return bad("ttr %s out of range 1ms..%s", p.TTR, MaxTTR)
	}
	if err := checkRate("rate", p.Rate); err != nil {
		return bad("%s", err)
	}
	if p.Concurrency < 0 || p.Concurrency > task.MaxConcurrency {
		return bad("concurrency %d out of range 0..%d", p.Concurrency, task.MaxConcurrency)
	}
	if k := p.PerKey; k != nil {
		if err := checkRate("per_key.rate", k.Rate); err != nil {
			return bad("%s", err)
		}
		if k.Concurrency < 0 || k.Concurrency > task.MaxConcurrency {
			return bad("per_key.concurrency %d out of range 0..%d", k.Concurrency, task.MaxConcurrency)
		}
		if k.Concurrency == 0 && k.Rate == nil {
			return bad("per_key without a limit: give per_key.concurrency or per_key.rate, or leave per_key out")
		}
	}
	if p.Dedupe < 0 || p.Dedupe > task.MaxDedupe {
		return bad("dedupe %s out of range 0s..%s (0s: no dedupe window)", p.Dedupe, task.MaxDedupe)
	}
	if p.DeadLetter != "" {
		if err := CheckQueue(p.DeadLetter); err != nil {
			return bad("dead_letter: %v", trimInvalid(err))
		}
		if p.DeadLetter == queue {
			return bad("dead_letter %q is the queue itself", p.DeadLetter)
		}
	}
	return CheckPush(p.Push)
}

// checkRate returns the reason r, a rate limit given as field, is out of
// bounds, or nil; a nil r is none.
func checkRate(field string, r *task.Rate) error {
	if r == nil {
		return nil
	}
	switch {
	case r.Limit < 1 || r.Limit > task.MaxRateLimit:
		return fmt.Errorf("%s.limit %d out of range 1..%d", field, r.Limit, task.MaxRateLimit)
	case r.Per <= 0 || r.Per > task.MaxRatePer:
		return fmt.Errorf("%s.per %s out of range: give more than 0s, at most %s", field, r.Per, task.MaxRatePer)
	case r.Burst < 0 || r.Burst > task.MaxRateLimit:
		return fmt.Errorf("%s.burst %d out of range 0..%d", field, r.Burst, task.MaxRateLimit)
	}
	return nil
}

// trimInvalid returns err's text without the task.ErrInvalid prefix, for
// an error wrapped again.
func trimInvalid(err error) string {
	s, p := err.Error(), task.ErrInvalid.Error()+": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// NormalPolicy returns p as it is recorded and reported: a rate's burst
// filled in (Limit when 0), the queue's and the per-key one's.
func NormalPolicy(p task.Policy) task.Policy {
	if p.Rate != nil && p.Rate.Burst == 0 {
		r := *p.Rate
		r.Burst = r.Limit
		p.Rate = &r
	}
	if k := p.PerKey; k != nil && k.Rate != nil && k.Rate.Burst == 0 {
		r := *k.Rate
		r.Burst = r.Limit
		p.PerKey = &task.PerKey{Concurrency: k.Concurrency, Rate: &r}
	}
	return p
}

// Refills says which token buckets a queue's change of policy from old
// to p (both as recorded, NormalPolicy) starts full: the queue's bucket
// when its rate limit changed, was set or removed (rate), and every key's
// when the per-key rate did (perKey). The same rate keeps its tokens, so
// that setting a policy again, or changing another field, neither grants
// a new burst nor takes tokens away. For example, from {Rate: 5/s} to
// {Rate: 5/s, Concurrency: 2}: neither; to {Rate: 10/s}: rate. The
// embedded engine calls it (broker/policy.go); a cluster node's policy
// statement compares the row it replaces the same way, in SQL, since it
// reads the old row only there (cluster/policy.go, sqlSetPolicy). O(1).
func Refills(old, p task.Policy) (rate, perKey bool) {
	return !sameRate(old.Rate, p.Rate), !sameRate(perKeyRate(old), perKeyRate(p))
}

// perKeyRate returns p's per-key rate, nil when it has none.
func perKeyRate(p task.Policy) *task.Rate {
	if p.PerKey == nil {
		return nil
	}
	return p.PerKey.Rate
}

// sameRate reports whether a and b are the same rate limit (nil: none).
func sameRate(a, b *task.Rate) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// DefaultMaxAttempts is the max_attempts of a task whose put and queue
// policy give none: river's and asynq's default.
const DefaultMaxAttempts = 25

// DefaultRetry is the back-off of a queue whose policy has no retry: a
// failed task comes back after 1 s, 2 s, 4 s … up to an hour, each ±10 %
// (the 24 delays between 25 attempts add up to about 13 hours).
var DefaultRetry = task.Retry{Initial: time.Second, Max: time.Hour, Multiplier: 2, Jitter: 0.1}

// ApplyDefaults sets r's ttr and max_attempts to what the task records:
// a put's own values win over its queue policy p's, and p's over the
// server's, serverTTR (Limits.DefaultTTR) and DefaultMaxAttempts. After
// it r.TTR is positive and r.MaxAttempts is 0 for no limit
// (MaxAttempts). For example, a put of neither into a queue whose policy
// says max_attempts 3 records ttr serverTTR and max_attempts 3; with a
// policy of task.UnlimitedAttempts, max_attempts 0. O(1).
func ApplyDefaults(r *task.PutRequest, p task.Policy, serverTTR time.Duration) {
	r.TTR = byPrecedence(r.TTR, p.TTR, serverTTR)
	r.MaxAttempts = MaxAttempts(r.MaxAttempts, p.MaxAttempts)
}

// DefaultSource is where a put's ttr or max_attempts may come from
// (ApplyDefaults).
type DefaultSource int

// The sources of a put's ttr and max_attempts.
const (
	FromPut    DefaultSource = iota // the put's own value
	FromPolicy                      // its queue policy's
	FromServer                      // the server's: Limits.DefaultTTR, DefaultMaxAttempts
)

// DefaultPrecedence returns the order in which ApplyDefaults takes a
// put's ttr and max_attempts from their sources: the first whose value
// is not 0 wins (the last, the server's, is never 0). The cluster's put
// statement builds its CASE from it (cluster/put.go's sqlDefault), so
// that one order holds on both engines.
func DefaultPrecedence() [3]DefaultSource {
	return [3]DefaultSource{FromPut, FromPolicy, FromServer}
}

// byPrecedence returns the first value not 0, in DefaultPrecedence's
// order, of a put's own, its policy's and the server's.
func byPrecedence[T int | time.Duration](put, policy, server T) T {
	by := [3]T{FromPut: put, FromPolicy: policy, FromServer: server}
	for _, s := range DefaultPrecedence() {
		if by[s] != 0 {
			return by[s]
		}
	}
	return 0
}

// MaxAttempts returns the max_attempts a task is put with, as it records
// it (0: no limit), from a put's own (0: none given) and its queue
// policy's: the first given in DefaultPrecedence's order, the server's
// DefaultMaxAttempts last; task.UnlimitedAttempts at the first given is
// no limit. The cluster's put statement does the same in SQL
// (cluster/put.go).
func MaxAttempts(put, policy int) int {
	return max(byPrecedence(put, policy, DefaultMaxAttempts), 0)
}

// Effective returns p as the engines apply it, each default filled in:
// the retry back-off (DefaultRetry, or immediate for a retry of initial
// 0s, with max, multiplier and jitter 0), max_attempts
// (DefaultMaxAttempts; task.UnlimitedAttempts stays) and ttr
// (defaultTTR, the server's). A rate's burst is filled as NormalPolicy
// does. What Effective says of a retry holds for a nack without a delay
// (a failed push too); a lease that runs out follows ExpiryDelay.
func Effective(p task.Policy, defaultTTR time.Duration) task.Policy {
	p = NormalPolicy(p)
	switch {
	case p.Retry == nil:
		r := DefaultRetry
		p.Retry = &r
	case p.Retry.Initial == 0:
		p.Retry = &task.Retry{}
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.TTR == 0 {
		p.TTR = defaultTTR
	}
	return p
}

// ExpiryDelay returns the delay AfterFailure is given for a lease of a
// task of a queue with policy p that ran out: the retry policy's
// (task.RetryDelay) when p has one, else 0, ready again at once. A lease
// that runs out has already kept the task from everyone for its ttr, and
// beanstalkd, whose protocol serves the same queues (package beanstalk),
// makes a job whose ttr ran out ready at once: its clients, and the
// differential test against beanstalkd, count on it. So DefaultRetry
// spaces the failures a client reports (a nack without a delay, a failed
// push), not the ones it was silent about; max_attempts bounds both.
func ExpiryDelay(p task.Policy) time.Duration {
	if p.Retry != nil {
		return task.RetryDelay
	}
	return 0
}

// RetryDelay returns how long after its n-th failed attempt (n ≥ 1) a
// task comes back under r: min(Max, Initial × Multiplier^(n−1)) times
// 1 − Jitter + 2 × Jitter × u, for u in [0, 1) drawn by the caller
// (math/rand/v2's Float64). A nil r is DefaultRetry; a retry of Initial
// 0 is 0, ready at once.
func RetryDelay(r *task.Retry, n int, u float64) time.Duration {
	if r == nil {
		r = &DefaultRetry
	}
	if r.Initial <= 0 {
		return 0
	}
	if n < 1 {
		n = 1
	}
	d := float64(r.Initial) * math.Pow(r.Multiplier, float64(n-1))
	if d > float64(r.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(r.Max)
	}
	d *= 1 - r.Jitter + 2*r.Jitter*u
	if d >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// Outcome is what becomes of a reserved task that failed.
type Outcome struct {
	// Dead: the task's attempts are used up, or it was buried.
	Dead bool
	// DeadLetter, when Dead, is the queue the task moves to, ready
	// ("" : it stays dead in its own queue).
	DeadLetter string
	// Delay, when not Dead, is how long from now until it is ready.
	Delay time.Duration
}

// AfterFailure decides what becomes of a reserved task of a queue with
// policy p that failed after attempts reservations (max_attempts
// maxAttempts as the task records it, 0: unlimited). delay is the
// caller's (a nack's delay, a push's Retry-After, a beanstalkd
// release's), which wins, or task.RetryDelay to leave it to the policy's
// back-off, DefaultRetry without one (a nack without a delay; a lease
// that ran out passes ExpiryDelay's); bury makes it dead whatever
// attempts are left. u is a uniform draw in [0, 1) for the jitter. O(1).
func AfterFailure(p task.Policy, attempts, maxAttempts int, delay time.Duration, bury bool, u float64) Outcome {
	if bury || UsedUp(attempts, maxAttempts) {
		return Outcome{Dead: true, DeadLetter: p.DeadLetter}
	}
	if delay == task.RetryDelay {
		delay = RetryDelay(p.Retry, attempts, u)
	}
	return Outcome{Delay: delay}
}

// UsedUp reports whether a task that has made attempts reservations (the
// one ending counted) of maxAttempts, as the task records it (0: no
// limit), has used its attempts up: AfterFailure's one test of a task's
// counters, after which a failed attempt is dead. A cluster's flush
// compares a row's counters the same way in SQL (cluster.sqlUsedUp),
// held equal to this over a grid of counters by cluster's
// TestFlush_UsedUpIsServices. O(1).
func UsedUp(attempts, maxAttempts int) bool {
	return maxAttempts > 0 && attempts >= maxAttempts
}

// DeadLettered returns what a task moved to a dead-letter queue of policy
// p starts there with, as a task put into it would: no attempts,
// max_attempts as the task records it (MaxAttempts of the policy's, 0
// for no limit) and the policy's ttr, 0 when it gives none (the task then
// keeps its own). Its attempts before the move stay in its attempt
// records, each with the queue it ran in. Both engines call it where
// they move the task (broker.deadLetter, cluster.settle). O(1).
func DeadLettered(p task.Policy) (maxAttempts int, ttr time.Duration) {
	return MaxAttempts(0, p.MaxAttempts), p.TTR
}

// CutError returns s cut to at most task.MaxErrorLen bytes at a UTF-8
// boundary, with invalid UTF-8 replaced, as a task's last error is kept.
func CutError(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // replaces each invalid byte with U+FFFD
	}
	if len(s) <= task.MaxErrorLen {
		return s
	}
	i := task.MaxErrorLen
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// PausedUntil returns when a pause of d from now (Unix ns) ends, in Unix
// ns: now + d, saturating at task.PausedForever's for
// task.PauseIndefinitely or an overflow; 0 for d == 0 (no pause).
func PausedUntil(now int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	if d == task.PauseIndefinitely || now > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return now + int64(d)
}

// Bucket is a token bucket of a queue's rate limit (task.Rate): Tokens
// left at time At, in ns on the engine's clock (the database's Unix ns on
// a cluster, the monotonic clock on the embedded engine), always above 0
// once used. The zero Bucket is full at its first Take.
type Bucket struct {
	Tokens float64
	At     int64
}

// Take refills b for the time since b.At at r.Limit per r.Per, up to
// r.Burst (r.Limit when 0), and takes up to n whole tokens at now. It
// returns how many it took and, when it took fewer than n, how long until
// the next token. A Bucket never used (At 0) starts full.
func (b *Bucket) Take(r task.Rate, now int64, n int) (took int, next time.Duration) {
	burst := r.Burst
	if burst == 0 {
		burst = r.Limit
	}
	per := float64(r.Per) / float64(r.Limit) // ns a token
	if b.At == 0 {
		b.Tokens = float64(burst)
	} else if now > b.At {
		b.Tokens += float64(now-b.At) / per
	}
	if b.Tokens > float64(burst) {
		b.Tokens = float64(burst)
	}
	if now > b.At {
		b.At = now
	}
	took = min(n, int(b.Tokens))
	b.Tokens -= float64(took)
	if took < n {
		next = time.Duration(math.Ceil((1 - b.Tokens) * per))
		if next < 1 {
			next = 1
		}
	}
	return took, next
}
