package api

import (
	"encoding/json"
	"errors"
	"time"
)

// Policy is the body of PUT /v1/queues/{queue}/policy and the answer of
// GET and PUT on that path: how the queue's failed tasks come back, the
// defaults of its puts, how fast and how many of its tasks are handed
// out, and where its dead tasks go. Every field is optional; GET of a
// queue without a policy answers {"effective": ...}: the defaults, as if
// its policy were {"retry": {"initial": "1s", "max": "1h", "multiplier":
// 2, "jitter": 0.1}, "max_attempts": 25} ([DefaultRetry],
// [DefaultMaxAttempts]), puts taking the server's ttr, nothing limited, a
// dead task staying in its queue. A policy asks for immediate retries
// with "retry": {"initial": "0s"} and for unlimited attempts with
// "max_attempts": -1 ([UnlimitedAttempts]). A nack's own delay, a
// worker's RetryAfter and a push endpoint's Retry-After win over the
// back-off. A policy is durable, holds on every node of a cluster, and
// applies to the tasks already in the queue.
type Policy struct {
	// Retry spaces a failed task's attempts (a nack without a delay, a
	// failed push, or, with a retry given, a lease that ran out): it
	// comes back after min(max, initial × multiplier^(n−1)) for its n-th
	// failed attempt, times a random factor in [1 − jitter, 1 + jitter],
	// never earlier. Absent: [DefaultRetry] for a nack or a push, and at
	// once for a lease that ran out (as beanstalkd does). Initial "0s":
	// at once, always (max "0s" or absent, multiplier 0 or absent).
	Retry *Retry `json:"retry,omitempty"`
	// MaxAttempts is the max_attempts of a put that gives none; absent or
	// 0: [DefaultMaxAttempts]; -1 ([UnlimitedAttempts]): no limit.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// TTR is the ttr of a put that gives none, 1ms to 24h (as a put's:
	// "0s" is refused); absent: the server's default.
	TTR *Duration `json:"ttr,omitempty"`
	// Rate hands out at most limit tasks per period across the whole
	// service (a token bucket of burst).
	Rate *Rate `json:"rate,omitempty"`
	// Concurrency is how many of the queue's tasks may be reserved at
	// once across the whole service; 0, left out on the wire, is no
	// limit. A body that gives "concurrency": 0 is refused (400), as any
	// value below 1.
	Concurrency int `json:"concurrency,omitempty"`
	// DeadLetter names the queue a task that dies moves to, ready, with
	// its id, payload, attempts and last error (a task of the same id
	// there is replaced).
	DeadLetter string `json:"dead_letter,omitempty"`
	// Push makes the server POST each ready task of the queue to an
	// endpoint instead of waiting for workers (push.go); absent: workers
	// reserve.
	Push *Push `json:"push,omitempty"`
	// Dedupe is how long after a task of the queue finishes (acked,
	// dead, deleted) a put of its id answers 200 with the finished task
	// ([FinishedRecord], state "finished") and puts nothing, at most
	// [MaxDedupe]; absent or "0s": a put after a finish puts a new task.
	Dedupe *Duration `json:"dedupe,omitempty"`
	// PerKey limits each key's tasks (a task's "key"; "" for a task put
	// without one) as rate and concurrency limit the whole queue's,
	// across the whole service and beside them (both hold).
	PerKey *PerKey `json:"per_key,omitempty"`
	// Effective, in an answer, holds the values the server applies of
	// the fields that have defaults: retry, max_attempts and ttr (an
	// immediate retry reads {"initial": "0s", "max": "0s", "multiplier":
	// 0, "jitter": 0}). It is ignored in a body, so that a policy read
	// can be written back.
	Effective *Policy `json:"effective,omitempty"`
}

// Defaults of a queue whose policy leaves them out (the server's
// service.DefaultRetry and service.DefaultMaxAttempts).
const (
	// DefaultMaxAttempts is the max_attempts of a task whose put and
	// queue policy give none.
	DefaultMaxAttempts = 25
	// UnlimitedAttempts, as max_attempts of a put, a schedule or a
	// policy, asks for no limit.
	UnlimitedAttempts = -1
)

// MaxDedupe bounds a policy's dedupe window: 30 days.
const MaxDedupe = 30 * 24 * time.Hour

// DefaultRetry is the back-off of a queue whose policy gives no retry:
// 1s, 2s, 4s … up to 1h, each ±10%.
var DefaultRetry = Retry{Initial: Duration(time.Second), Max: Duration(time.Hour), Multiplier: 2, Jitter: 0.1}

// Retry is a [Policy]'s exponential back-off. Initial > 0, Max ≥
// Initial, Multiplier ≥ 1, Jitter in [0, 1]; or Initial 0 (retry at
// once), Max 0, Multiplier 0 or ≥ 1, Jitter in [0, 1].
type Retry struct {
	Initial    Duration `json:"initial"`
	Max        Duration `json:"max"`
	Multiplier float64  `json:"multiplier"`
	Jitter     float64  `json:"jitter"`
}

// Rate is a [Policy]'s rate limit: Limit tasks per Per, in bursts of up
// to Burst (absent: Limit).
type Rate struct {
	Limit int      `json:"limit"`
	Per   Duration `json:"per"`
	Burst int      `json:"burst,omitempty"`
}

// PerKey is a [Policy]'s limits per key: at most Concurrency tasks of
// one key reserved (or being pushed) at once (left out: no limit; 0 is
// refused), and at most Rate of one key's tasks handed out.
type PerKey struct {
	Concurrency int   `json:"concurrency,omitempty"`
	Rate        *Rate `json:"rate,omitempty"`
}

// PauseRequest is the body of POST /v1/queues/{queue}/pause: how long
// the queue hands out nothing (absent: until resumed). Puts go on.
type PauseRequest struct {
	For *Duration `json:"for,omitempty"`
}

// ReleaseRequest is the body of release: the lease, and how long the
// task waits before it is ready again (absent: ready at once). A release
// does not count the attempt: a worker shutting down gives its tasks
// back with it. The answer is the task as it is after, without its
// payload ("payload": null; GET the task for it).
type ReleaseRequest struct {
	Lease string    `json:"lease"`
	Delay *Duration `json:"delay,omitempty"`
}

// BuryRequest is the body of bury: the lease, and why (kept as the
// task's last_error, at most [MaxError] bytes). The task is dead at
// once, whatever attempts are left, or moved to the queue's dead-letter
// queue. The answer is the task as it is after, without its payload
// ("payload": null; GET the task for it).
type BuryRequest struct {
	Lease string `json:"lease"`
	Error string `json:"error,omitempty"`
}

// MaxError bounds the error text of a nack or bury, in bytes; a longer
// one is cut to it.
const MaxError = 4096

// CheckPolicyBody refuses the zeros a policy body gives explicitly where
// p, the body decoded, would read them as absent: "concurrency": 0 (0 in
// Policy is no limit, the default), and a "ttr" or push "timeout" of 0s
// (each a default; a put's "ttr": "0s" is refused too). Each is refused
// like the values below its range rather than taken for the default.
// body must be one JSON object, as decoded into p. The server answers
// its error with 400; the CLI checks a policy it is given the same way.
func CheckPolicyBody(p Policy, body []byte) error {
	if p.TTR != nil && p.TTR.D() == 0 {
		return errors.New("hourglass: policy: ttr 0s: give 1ms or more, or leave it out for the server's default")
	}
	if p.Push != nil && p.Push.Timeout != nil && p.Push.Timeout.D() == 0 {
		return errors.New("hourglass: policy: push.timeout 0s: give 1ms or more, or leave it out for the default (30s)")
	}
	var probe struct {
		Concurrency *int `json:"concurrency"`
		PerKey      *struct {
			Concurrency *int `json:"concurrency"`
		} `json:"per_key"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return nil
	}
	if p.Concurrency == 0 && probe.Concurrency != nil {
		return errors.New("hourglass: policy: concurrency 0: give at least 1, or leave it out for no limit")
	}
	if p.PerKey != nil && p.PerKey.Concurrency == 0 && probe.PerKey != nil && probe.PerKey.Concurrency != nil {
		return errors.New("hourglass: policy: per_key.concurrency 0: give at least 1, or leave it out for no limit")
	}
	return nil
}
