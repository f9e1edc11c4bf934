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
//   - ApplyDefaults fills a put's ttr and max_attempts from the policy.
//   - AfterFailure decides what becomes of a reserved task that failed (a
//     nack, a lease that ran out, a bury): ready again after a delay, or
//     dead, and then moved to a dead-letter queue or not.
//   - Bucket is the rate limit's token bucket; the embedded engine keeps
//     one per queue in memory, the cluster one per queue in a row, read
//     and written under a row lock by each reserve.
//
// A worked example. Policy {Retry: {Initial: 1s, Max: 1m, Multiplier: 2,
// Jitter: 0.1}, MaxAttempts: 5, DeadLetter: "mail-dead"}: a task of the
// queue reserved for the first time (attempts 1) and nacked without a
// delay comes back after 1 s × [0.9, 1.1]; after its second attempt
// 2 s × [0.9, 1.1], then 4 s, 8 s; its fifth failure finds its attempts
// used up, and it moves to queue "mail-dead", ready, with attempts 5 and
// the last error kept. A nack with a delay of the caller's, or a
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
		case r.Initial <= 0 || r.Initial > task.MaxRetryDelay:
			return bad("retry.initial %s out of range: give more than 0s, at most %s", r.Initial, task.MaxRetryDelay)
		case r.Max < r.Initial || r.Max > task.MaxRetryDelay:
			return bad("retry.max %s out of range: give retry.initial (%s) or more, at most %s", r.Max, r.Initial, task.MaxRetryDelay)
		case !(r.Multiplier >= 1 && r.Multiplier <= task.MaxMultiplier):
			return bad("retry.multiplier %g out of range 1..%d", r.Multiplier, task.MaxMultiplier)
		case !(r.Jitter >= 0 && r.Jitter <= 1):
			return bad("retry.jitter %g out of range 0..1", r.Jitter)
		}
	}
	if p.MaxAttempts < 0 || int64(p.MaxAttempts) > task.MaxAttemptsLimit {
		return bad("max_attempts %d out of range 0..%d", p.MaxAttempts, int64(task.MaxAttemptsLimit))
	}
	if p.TTR < 0 || p.TTR > MaxTTR || p.TTR > 0 && p.TTR < time.Millisecond {
		return bad("ttr %s out of range 1ms..%s", p.TTR, MaxTTR)
	}
	if r := p.Rate; r != nil {
		switch {
		case r.Limit < 1 || r.Limit > task.MaxRateLimit:
			return bad("rate.limit %d out of range 1..%d", r.Limit, task.MaxRateLimit)
		case r.Per <= 0 || r.Per > task.MaxRatePer:
			return bad("rate.per %s out of range: give more than 0s, at most %s", r.Per, task.MaxRatePer)
		case r.Burst < 0 || r.Burst > task.MaxRateLimit:
			return bad("rate.burst %d out of range 0..%d", r.Burst, task.MaxRateLimit)
		}
	}
	if p.Concurrency < 0 || p.Concurrency > task.MaxConcurrency {
		return bad("concurrency %d out of range 0..%d", p.Concurrency, task.MaxConcurrency)
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
// filled in (Limit when 0).
func NormalPolicy(p task.Policy) task.Policy {
	if p.Rate != nil && p.Rate.Burst == 0 {
		r := *p.Rate
		r.Burst = r.Limit
		p.Rate = &r
	}
	return p
}

// ApplyDefaults fills r's ttr and max_attempts from p where r gives none;
// a put's own values win.
func ApplyDefaults(r *task.PutRequest, p task.Policy) {
	if r.TTR == 0 {
		r.TTR = p.TTR
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = p.MaxAttempts
	}
}

// RetryDelay returns how long after its n-th failed attempt (n ≥ 1) a
// task comes back under r: min(Max, Initial × Multiplier^(n−1)) times
// 1 − Jitter + 2 × Jitter × u, for u in [0, 1) drawn by the caller
// (math/rand/v2's Float64). It is 0 for a nil r.
func RetryDelay(r *task.Retry, n int, u float64) time.Duration {
	if r == nil {
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
// maxAttempts, 0: unlimited). delay is the caller's (a nack's delay, a
// beanstalkd release's) or task.RetryDelay to leave it to the policy (a
// nack without one, a lease that ran out); bury makes it dead whatever
// attempts are left. u is a uniform draw in [0, 1) for the jitter.
func AfterFailure(p task.Policy, attempts, maxAttempts int, delay time.Duration, bury bool, u float64) Outcome {
	if bury || maxAttempts > 0 && attempts >= maxAttempts {
		return Outcome{Dead: true, DeadLetter: p.DeadLetter}
	}
	if delay == task.RetryDelay {
		delay = RetryDelay(p.Retry, attempts, u)
	}
	return Outcome{Delay: delay}
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
