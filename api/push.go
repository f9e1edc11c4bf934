package api

// Push is a [Policy]'s push endpoint: the server POSTs each ready task of
// the queue to URL itself, instead of waiting for a worker to reserve it
// (the way Cloud Tasks, QStash or an xxl-job executor are called).
//
//	PUT /v1/queues/email/policy
//	{"push": {"url": "https://app.internal/hooks/email", "timeout": "30s",
//	          "headers": {"X-Env": "prod"}, "secret": "whsec_…"}}
//
// GET answers the secret as "secret_set": true, never the secret itself
// (and "next_secret_set" likewise); a PUT replaces the whole policy, so
// give the secrets again with it (a PUT with "secret_set": true and no
// "secret" is 400, so that a policy read and written back does not lose
// its signing unawares).
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
//	X-Env: prod
//	webhook-id: msg_1234_1772366399000000000
//	webhook-timestamp: 1772366400
//	webhook-signature: v1,IS3WiXOzYY6X8ARsgiyR5OTObsdAehXnTW/9x9LJL6A=
//
//	{"to":"a@b.c"}
//
// (the signature above is the one of the secret
// "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" over that id, time and body:
// a receiver's test vector).
//
// Hourglass-Attempt counts from 1 (the task's attempts with this one);
// Hourglass-Due is the due time the task was ready at (RFC 3339,
// nanoseconds, UTC). The configured headers follow; they cannot be
// Hourglass-*, webhook-id, webhook-timestamp, webhook-signature, Host,
// Content-Length or hop-by-hop headers.
//
// webhook-id is the same for every attempt of a task, across restarts,
// and never another task's, even one put later under the same id: it is
// "msg_", the task's job id (unique in a store, never reused), "_" and
// the time the task was put in Unix nanoseconds (so that a store started
// anew does not repeat the ids of one before it). Receivers dedupe on it;
// treat it as opaque. webhook-timestamp is the Unix time in seconds when
// the attempt was sent. Both are sent with or without a secret.
//
// # The signature
//
// Pushes are signed as Standard Webhooks (standardwebhooks.com)
// specifies, so its libraries in every language check them. With a
// secret, webhook-signature is "v1,<S>", where S is the standard base64
// of HMAC-SHA256 over the webhook-id, a dot, the webhook-timestamp, a
// dot, and the body:
//
//	S = base64(HMAC-SHA256(key, id + "." + timestamp + "." + body))
//
// The id is signed, so a push captured cannot be replayed under another
// task's id. The key of a secret "whsec_<base64>" is the bytes its
// base64 encodes (the spec's form: give secrets so, e.g. "whsec_" and 24
// random bytes in base64); a secret without that prefix is used as raw
// bytes (the libraries take it with an option, such as
// {format: "raw"} in Node's). While a key is rotated, a policy holds a
// next_secret as well, and each push carries both signatures,
// space-separated ("v1,<S1> v1,<S2>"); a receiver accepts a push if any
// signature matches a key it holds. To rotate: set next_secret, move the
// receivers to the new key, then make it the secret and drop
// next_secret.
//
// A receiver recomputes S from the body as received (before any JSON
// parsing), compares it in constant time, and refuses a timestamp more
// than 5 minutes from its clock (a replay). Package push's Verify does
// this in Go; in Python:
//
//	msg = id.encode() + b"." + ts.encode() + b"." + body
//	sig = base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()
//	ok = any(hmac.compare_digest("v1," + sig, s) for s in header.split()) and abs(time.time() - int(ts)) <= 300
//
// The Hourglass-Signature header of earlier versions (hex HMAC over the
// timestamp and body only, which a captured push could be replayed
// under another task with) is no longer sent. Those versions used a
// whsec_ secret's bytes as they are: a policy whose secret is whsec_ but
// not base64 (refused now when set) fails its pushes unsent, its last
// error saying so, until the secret is set again.
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
// the receiver idempotent on webhook-id.
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
	// Secret signs each push (webhook-signature): "whsec_" and the
	// standard base64 of the key, or a raw key; at most 256 bytes. Only
	// ever written, never answered.
	Secret string `json:"secret,omitempty"`
	// SecretSet, in answers, says that the endpoint has a secret.
	SecretSet bool `json:"secret_set,omitempty"`
	// NextSecret, with Secret, is a key being rotated in: each push
	// carries a signature of each. The same rules as Secret's.
	NextSecret string `json:"next_secret,omitempty"`
	// NextSecretSet, in answers, says that the endpoint has a next
	// secret.
	NextSecretSet bool `json:"next_secret_set,omitempty"`
}

// Headers of a push request.
const (
	PushQueueHeader   = "Hourglass-Queue"
	PushTaskIDHeader  = "Hourglass-Task-Id"
	PushJobIDHeader   = "Hourglass-Job-Id"
	PushAttemptHeader = "Hourglass-Attempt"
	PushDueHeader     = "Hourglass-Due"
	// Standard Webhooks' headers (the section "The signature" above).
	PushIDHeader        = "webhook-id"
	PushTimestampHeader = "webhook-timestamp"
	PushSignatureHeader = "webhook-signature"
)

// PushTolerance is how far from a receiver's clock a signature's time may
// be: 5 minutes, in seconds.
const PushTolerance = 300
