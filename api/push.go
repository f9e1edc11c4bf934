package api

// Push is a [Policy]'s push endpoint: the server POSTs each ready task of
// the queue to URL itself, instead of waiting for a worker to reserve it
// (the way Cloud Tasks, QStash or an xxl-job executor are called).
//
//	PUT /v1/queues/email/policy
//	{"push": {"url": "https://app.internal/hooks/email", "timeout": "30s",
//	          "headers": {"X-Env": "prod"}, "secret": "whsec_…"}}
//
// GET answers the secret as "secret_set": true, never the secret itself;
// a PUT replaces the whole policy, so give the secret again with it (a
// PUT with "secret_set": true and no "secret" is 400, so that a policy
// read and written back does not lose its signing unawares).
//
// # The request
//
// A task is pushed when it is ready, never early, within the queue's
// rate and concurrency limits and not while the queue is paused; every
// node of a cluster pushes. Each push is one request:
//
//	POST <url>
//	Content-Type: application/json
//	Hourglass-Queue: email
//	Hourglass-Task-Id: welcome-42
//	Hourglass-Job-Id: 1234
//	Hourglass-Attempt: 1
//	Hourglass-Due: 2026-03-01T12:00:00.123456789Z
//	Hourglass-Signature: t=1772366400,v1=e857f1fb727ab71e92f638753255f758b7118be61094698108742f86ce2c73a7
//	X-Env: prod
//
//	{"to":"a@b.c"}
//
// (the signature above is the one of the secret "whsec_test" at that
// time over that body: a receiver's test vector).
//
// Hourglass-Attempt counts from 1 (the task's attempts with this one);
// Hourglass-Due is the due time the task was ready at (RFC 3339,
// nanoseconds, UTC). The configured headers follow; they cannot be
// Hourglass-*, Host, Content-Length or hop-by-hop headers.
//
// # The signature
//
// With a secret, Hourglass-Signature is "t=<T>,v1=<S>", where T is the
// Unix time in seconds when the request was signed and S is the
// lower-case hex of HMAC-SHA256 keyed with the secret's bytes over the
// bytes of T in decimal, a dot, and the body:
//
//	S = hex(HMAC-SHA256(secret, T + "." + body))
//
// the scheme of Stripe's and Standard Webhooks' signatures. A receiver
// recomputes S from the body as received (before any JSON parsing),
// compares it in constant time, and refuses a T more than 5 minutes from
// its clock (a replay). Package push's Verify does this in Go; in
// Python:
//
//	t, v1 = (kv.split("=", 1)[1] for kv in header.split(","))
//	mac = hmac.new(secret, t.encode() + b"." + body, hashlib.sha256)
//	ok = hmac.compare_digest(mac.hexdigest(), v1) and abs(time.time() - int(t)) <= 300
//
// # The answer
//
//   - Any 2xx: the task is done (acknowledged).
//   - 429 or 503 with Retry-After (seconds, or an HTTP date): the attempt
//     is counted and the task comes back after that delay.
//   - Any other status, no answer within the timeout, a refused or reset
//     connection: a failed attempt; the task comes back after the
//     queue's retry back-off, or dies (or moves to the dead-letter queue)
//     once its attempts are used up. Its last_error says why: "push:
//     HTTP 500: <the first 200 bytes of the body>", "push: timeout after
//     30s", "push: <the connection's error>". The body and the
//     connection's error are shown only for a target the server may echo
//     to the API's callers (a server with no --push-allow on loopback,
//     or a host --push-allow names exactly, not through a CIDR): else
//     "push: HTTP 500" and "push: the connection failed".
//
// Delivery is at least once: a server that stops mid-push leaves the
// task reserved until its lease runs out, and it is pushed again. Make
// the receiver idempotent on Hourglass-Queue and Hourglass-Task-Id.
//
// # Targets
//
// `hourglass serve --push-allow LIST` (host names, addresses and CIDRs)
// limits the hosts a push may reach; a server listening beyond loopback
// reaches none until it is given. The cloud metadata endpoints (link-local
// 169.254.0.0/16 and fe80::/10, fd00:ec2::254, fd20:ce::254,
// 100.100.100.200, 168.63.129.16, 0.0.0.0/8 and ::,
// metadata.google.internal, metadata, metadata.goog, in any
// spelling: IPv4-mapped, NAT64, 2130706433, ...) and the server's own
// listen addresses are refused unless the list names them exactly, both
// when a policy names one (400, naming the rule) and when a name resolves
// to one at connection time (pusher.Targets).
type Push struct {
	// URL is the endpoint, http or https, at most 2048 bytes.
	URL string `json:"url"`
	// Timeout bounds each push, from the dial to the answer read (its
	// status, headers and up to 64 KiB of its body): 1ms to 15m;
	// absent: 30s. A task's ttr shorter than it is renewed while the
	// push runs.
	Timeout *Duration `json:"timeout,omitempty"`
	// Headers are sent with every push: at most 32, each name and value
	// together at most 1024 bytes.
	Headers map[string]string `json:"headers,omitempty"`
	// Secret signs each push (Hourglass-Signature), at most 256 bytes;
	// only ever written, never answered.
	Secret string `json:"secret,omitempty"`
	// SecretSet, in answers, says that the endpoint has a secret.
	SecretSet bool `json:"secret_set,omitempty"`
}

// Headers of a push request.
const (
	PushQueueHeader     = "Hourglass-Queue"
	PushTaskIDHeader    = "Hourglass-Task-Id"
	PushJobIDHeader     = "Hourglass-Job-Id"
	PushAttemptHeader   = "Hourglass-Attempt"
	PushDueHeader       = "Hourglass-Due"
	PushSignatureHeader = "Hourglass-Signature"
)

// PushTolerance is how far from a receiver's clock a signature's time may
// be: 5 minutes, in seconds.
const PushTolerance = 300
