package task

import "time"

// Policy is a queue's policy: how its failed tasks come back, the
// defaults of its puts, how fast and how many of its tasks are handed
// out, and where its dead tasks go. The zero Policy is the default: a
// failed task comes back after the service's default back-off
// (service.DefaultRetry), puts take the server's defaults (max_attempts
// service.DefaultMaxAttempts), nothing limits reserves, a dead task
// stays in its queue. A policy applies to the tasks already in the queue
// as well as to new ones (max_attempts and ttr: to the puts after it).
type Policy struct {
	// Retry spaces the attempts of a failed task; nil: the service's
	// default back-off (service.DefaultRetry) after a nack, at once after
	// a lease that ran out (service.ExpiryDelay); a Retry with Initial 0:
	// ready again at once.
	Retry *Retry
	// MaxAttempts is the max_attempts of a put that gives none; 0: the
	// service's default (service.DefaultMaxAttempts); UnlimitedAttempts:
	// no limit.
	MaxAttempts int
	// TTR is the ttr of a put that gives none; 0: the server's default.
	TTR time.Duration
	// Rate limits how many tasks are handed out per period, across the
	// whole service; nil: no limit.
	Rate *Rate
	// Concurrency limits how many of the queue's tasks are reserved at
	// once, across the whole service; 0: no limit.
	Concurrency int
	// DeadLetter names the queue a task that dies moves to, ready, with
	// its id, payload, attempts and last error; "": it stays dead here.
	DeadLetter string
	// Push makes the service deliver the queue's tasks itself, by an
	// HTTP POST to an endpoint, instead of waiting for workers to
	// reserve them; nil: workers pull.
	Push *Push
	// Dedupe is how long after a task of the queue finishes (acked,
	// dead, deleted) a put of its id answers the finished task and puts
	// nothing (service.Dedupes); 0: never, a put after a finish puts a
	// new task.
	Dedupe time.Duration
	// PerKey limits each key's tasks (Task.Key; "" for a task put
	// without one) as Rate and Concurrency limit the whole queue's,
	// across the whole service, beside them (both hold); nil: no limit
	// per key.
	PerKey *PerKey
}

// PerKey is a queue's limits per key: at most Concurrency tasks of one
// key reserved (or being pushed) at once (0: no limit), and at most Rate
// of one key's tasks handed out (nil: no limit).
type PerKey struct {
	Concurrency int
	Rate        *Rate
}

// UnlimitedAttempts, as the MaxAttempts of a put, a schedule or a
// policy, asks for no limit on a task's attempts; 0 there leaves it to
// the policy, then to the service's default (service.DefaultMaxAttempts).
const UnlimitedAttempts = -1

// Push is a push queue's endpoint: each ready task is POSTed to URL
// with the configured headers, signed with Secret when set (and with
// NextSecret as well, a key being rotated in), under a lease of Timeout
// (0: DefaultPushTimeout).
type Push struct {
	URL        string
	Timeout    time.Duration
	Headers    map[string]string
	Secret     string
	NextSecret string
}

// Bounds of a push endpoint, checked by service.CheckPolicy.
const (
	DefaultPushTimeout = 30 * time.Second
	MaxPushTimeout     = 15 * time.Minute
	MaxPushURL         = 2048
	MaxPushHeaders     = 32
	MaxPushHeaderLen   = 1024 // a header's name and value together, in bytes
	MaxPushSecret      = 256  // each of Secret and NextSecret
)

// IsZero reports whether p is the default policy.
func (p Policy) IsZero() bool {
	return p.Retry == nil && p.MaxAttempts == 0 && p.TTR == 0 && p.Rate == nil && p.Concurrency == 0 && p.DeadLetter == "" && p.Push == nil && p.Dedupe == 0 && p.PerKey == nil
}

// Retry is exponential back-off: a task failing its n-th attempt comes
// back after min(Max, Initial × Multiplier^(n−1)), times a random factor
// in [1 − Jitter, 1 + Jitter] (service.RetryDelay). Initial 0 asks for
// immediate retries: the task is ready again at once (Max is then 0).
type Retry struct {
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Jitter     float64
}

// Rate is a token bucket: Limit tasks per Per, up to Burst at once
// (0: Limit).
type Rate struct {
	Limit int
	Per   time.Duration
	Burst int
}

// RetryDelay, given as a nack's delay, leaves the delay to the queue's
// retry policy (service.DefaultRetry without one).
const RetryDelay time.Duration = -1

// PauseIndefinitely, given as a pause's length, pauses a queue until it is
// resumed (a pause of 0).
const PauseIndefinitely time.Duration = 1<<63 - 1

// PausedForever is QueueStats.PausedUntil of a queue paused until
// resumed: the largest time an engine records (Unix ns 1<<63 - 1).
var PausedForever = time.Unix(0, 1<<63-1).UTC()

// Bounds of a policy's fields, checked by service.CheckPolicy.
const (
	// MaxRetryDelay bounds a retry policy's initial and max delays.
	MaxRetryDelay = 365 * 24 * time.Hour
	// MaxMultiplier bounds a retry policy's multiplier.
	MaxMultiplier = 1000
	// MaxAttemptsLimit bounds max_attempts, of a policy and of a put.
	MaxAttemptsLimit = 1<<32 - 1
	// MaxRateLimit bounds a rate's limit and burst.
	MaxRateLimit = 1_000_000_000
	// MaxRatePer bounds a rate's period.
	MaxRatePer = 24 * time.Hour
	// MaxConcurrency bounds a concurrency limit.
	MaxConcurrency = 1_000_000
	// MaxErrorLen bounds the error text a nack or bury keeps, in bytes;
	// a longer text is cut to it (at a UTF-8 boundary).
	MaxErrorLen = 4096
	// MaxDedupe bounds a dedupe window: the finished-id records of a
	// queue live at most this long.
	MaxDedupe = 30 * 24 * time.Hour
)

// LeaseExpired is the last error of a task whose lease ran out.
const LeaseExpired = "lease expired"
