// Package api defines the JSON wire types of hourglass's HTTP API, the one
// `hourglass serve` answers (package httpapi) and the Go client calls
// (package client). Clients outside this repository call the same API, so
// these types are its specification: field names, optional fields and the
// encodings of times and durations below do not change.
//
// # Encodings
//
// Times are RFC 3339 strings with nanoseconds in UTC
// ("2026-03-01T12:00:00.123456789Z"). Durations are Go duration strings
// ("1.5s", "250ms", "72h"), never numbers: see [Duration]. Payloads are any
// JSON value, kept byte for byte as sent and returned as such. Fields
// marked optional are pointers or omitted when zero, so that a server can
// tell "absent" from an explicit zero (an explicit "max":0 is an error,
// an absent one means 1).
//
// # The contract
//
// api/openapi.yaml ([OpenAPI]) is the machine-readable form of what this
// package says: an OpenAPI 3.1 document of every route, parameter, body,
// status and error, one schema per type here, named like it. The server
// answers it as JSON at GET /v1/openapi.json, without the token; clients
// in other languages can generate their types from it. The tests hold the
// server to it: every request and answer of the HTTP and black-box tests
// is validated against it (internal/apitest), and its routes are the
// server's (httpapi's TestOpenAPIRoutes). Its webhooks.push is the
// request a push endpoint receives (push.go), checked against the
// pusher's own requests (apitest's TestDocument_Push).
//
// # Routes
//
// Every /v1 route needs "Authorization: Bearer TOKEN" when the server has
// a token. Errors are [Error] bodies with the status in parentheses.
//
//	POST   /v1/queues/{queue}/tasks             PutRequest     → 201 Task (new) | 200 Task (existing id, or replaced)
//	POST   /v1/queues/{queue}/tasks:batch       BatchRequest   → 200 BatchResponse
//	GET    /v1/queues/{queue}/tasks/{id}                       → 200 Task | 200 FinishedRecord (finished, in the history) | 404
//	DELETE /v1/queues/{queue}/tasks/{id}                       → 204 (a reserved task's holder stops: see cancel) | 404
//	POST   /v1/queues/{queue}/reserve           ReserveRequest → 200 ReserveResponse
//	POST   /v1/queues/{queue}/tasks/{id}/ack    LeaseRequest   → 204 | 400 (no lease) | 404 | 409 (stale lease)
//	POST   /v1/queues/{queue}/tasks/{id}/touch  LeaseRequest   → 200 Task (with its lease) | 400 | 404 | 409
//	POST   /v1/queues/{queue}/tasks/{id}/nack   NackRequest    → 200 Task (delayed, ready, dead, or in the dead-letter queue) | 400 | 404 | 409
//	POST   /v1/queues/{queue}/tasks/{id}/release ReleaseRequest → 200 Task | 400 | 404 | 409
//	POST   /v1/queues/{queue}/tasks/{id}/bury   BuryRequest    → 200 Task | 400 | 404 | 409
//	POST   /v1/queues/{queue}/tasks/{id}/kick                  → 204 | 404 | 409 (not dead)
//	POST   /v1/queues/{queue}/tasks/{id}/cancel                → 204 (deleted in any state, recorded cancelled; its holder stops) | 404 (none, or cancelled already)
//	GET    /v1/queues/{queue}/tasks/{id}/attempts              → 200 AttemptsResponse | 404
//	GET    /v1/queues/{queue}/history?outcome=O&after=N&limit=N → 200 HistoryResponse | 400
//	PUT    /v1/queues/{queue}/policy            Policy         → 200 Policy | 400
//	GET    /v1/queues/{queue}/policy                           → 200 Policy (with "effective"; only it when none)
//	DELETE /v1/queues/{queue}/policy                           → 204
//	POST   /v1/queues/{queue}/pause             PauseRequest   → 204 | 400
//	POST   /v1/queues/{queue}/resume                           → 204
//	POST   /v1/reserve                          ReserveQueuesRequest → 200 ReserveResponse
//	POST   /v1/acks                             AcksRequest    → 200 AcksResponse
//	POST   /v1/leases:cancelled                 LeasesRequest  → 200 LeasesResponse | 400
//	GET    /v1/queues                                          → 200 QueuesResponse
//	PUT    /v1/schedules/{name}                 ScheduleRequest → 200 Schedule
//	GET    /v1/schedules                                       → 200 SchedulesResponse
//	GET    /v1/schedules/{name}                                → 200 Schedule | 404
//	DELETE /v1/schedules/{name}                                → 204 | 404
//	GET    /v1/schedules/{name}/runs?limit=N&after=T           → 200 ScheduleRunsResponse | 400 | 404
//	GET    /healthz                                            → 200 while the process can serve | 503 once its store failed (a restart is needed)
//	GET    /readyz                                             → 200 once recovery is done, 503 before, while stopping, and while a cluster node cannot reach its database
//	GET    /metrics                                            → Prometheus text format
//	GET    /v1/openapi.json                                    → 200 this API's OpenAPI document (no token needed)
//
// The routes for looking at a server (task pages, statistics, the
// dashboard's) are listed in observe.go; the history's (a task's
// attempts, the tasks that left a queue) in history.go.
//
// # Failures and retries
//
// A failed task (a nack without a delay, a failed push) comes back after
// its queue's retry back-off; a queue whose policy gives none backs off
// as if its policy were {"retry": {"initial": "1s", "max": "1h",
// "multiplier": 2, "jitter": 0.1}, "max_attempts": 25} ([DefaultRetry],
// [DefaultMaxAttempts]), and GET .../policy shows these under
// "effective". A policy asks for immediate retries with "retry":
// {"initial": "0s"}, and for unlimited attempts with "max_attempts": -1
// ([UnlimitedAttempts]); a put's own max_attempts wins over its queue's,
// and a schedule's likewise. A nack's own delay, a worker's RetryAfter
// and a push endpoint's Retry-After win over the back-off. A lease that
// runs out comes back at once unless the policy gives a retry, as in
// beanstalkd; a task put over the beanstalkd protocol has unlimited
// attempts. A task keeps its first [AttemptsKeptFirst] and last
// [AttemptsKeptLast] attempt records ([AttemptsResponse]'s "dropped"
// counts those left out).
//
// Any /v1 call answers 400 for malformed JSON, unknown fields or a bad
// value, 401 without the token, 413 for a body over the size limit and
// 503 while the server is recovering or stopping; a write answers 507
// once the server's disk is full. Ids and queue names go into paths
// escaped as path segments (url.PathEscape).
//
// # Access, browsers and limits
//
// Without a token every route is open to whoever reaches the address,
// which is loopback unless --insecure. With one, /healthz, /readyz,
// /v1/openapi.json and the dashboard's page stay open, so that probes
// need no token; the dashboard's data comes from /v1, which needs the
// token. /metrics names every queue, so it needs the token too
// (Prometheus sends it with `authorization: {credentials: TOKEN}` in the
// scrape config), unless `hourglass serve --metrics-without-token` opens
// it.
//
// A POST, PUT or DELETE that a browser marks as sent from another origin
// (Sec-Fetch-Site, or Origin) answers 403, unless `hourglass serve
// --allow-origin ORIGIN` allows that origin; on a loopback address, a
// request whose Host is not a loopback address, localhost or a name
// under it answers 403 too (DNS rebinding). Clients that are not
// browsers send neither header and are not concerned.
//
// A request's body must arrive within --body-timeout (1 minute) of its
// headers, or it answers 408 and its connection is closed; a reserve's
// wait is not counted in it. The bodies being served at once may hold
// 128 MiB: a request that would go over waits up to 10 s, then answers
// 503 with Retry-After, its body unread. A body counts its whole
// Content-Length while it flows, and only what has arrived once nothing
// has come for a second or two, so that bodies declared and not sent do
// not keep others out. A 401 closes its connection.
// At --max-conns (4,096) open connections, a new connection closes the
// one that has waited longest for a request (a keep-alive connection
// between calls, or one that sent nothing yet), as the idle timeout (2
// minutes) would have, or else one whose answer has waited 5 s or more
// for its client to read it; it is itself closed at once only when
// neither exists. A client must take each 64 KiB of an answer within a
// minute, or its connection is closed.
//
// The beanstalkd port (--beanstalk) has no authentication, as beanstalkd
// has none: keep it on loopback or a private network.
//
// A put answered 503 or 507, or not answered at all, may still have been
// committed (its commit can land as the server stops). A client that
// retries a put should give it an id: a put naming the id of a live task
// answers 200 with that task unchanged, so the retry of a put that
// landed puts nothing. (Without "replace": true; and an id is free again
// once its task is acked or deleted.)
package api
