// Package httpapi serves hourglass's HTTP API (package api describes the
// routes and the wire types) over a [service.Service], on either engine. It
// is a thin adapter: each handler decodes a request, checks what only the
// wire can get wrong (JSON syntax, unknown fields, durations written as
// numbers, both delay and at, reserve's max and wait, a negative nack or
// release delay, a pause "for" 0s or less), makes one service
// call and encodes the answer. What a request means, and every limit on
// names, ids, payloads and delays, is the service's business.
//
// A [Server] starts without a service, answering /healthz but 503 on
// /readyz and every /v1 route, so that a process can listen while it
// recovers; [Server.SetService] makes it ready. [Server.Drain] begins a
// shutdown: /readyz turns 503 and waiting reserves answer at once, so
// that http.Server.Shutdown does not wait out their long polls.
package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// Options configure a [Server]. The zero Options serve without a token,
// with the broker's default payload limit and the default Prometheus
// registry.
type Options struct {
	// Token, when set, is required on every /v1 call, and on /metrics
	// (which names every queue), as "Authorization: Bearer TOKEN".
	Token string
	// MetricsWithoutToken serves /metrics without the token, for a
	// scraper that cannot send one.
	MetricsWithoutToken bool
	// MaxPayload is the broker's payload limit in bytes (default 1 MiB).
	// A put's body may be this plus [Envelope]; a longer one is refused
	// with 413 before it is read whole.
	MaxPayload int
	// MaxBatchBody bounds the body of a tasks:batch call (default 64 MiB,
	// and never under one put's limit).
	MaxBatchBody int64
	// BodyTimeout bounds the time a request's body may take to arrive,
	// from its headers (limits.go); default [DefaultBodyTimeout],
	// negative: no bound. A reserve's wait for tasks is not bounded by it.
	BodyTimeout time.Duration
	// MaxBodyMemory bounds the bytes of request bodies served at once
	// (limits.go); default twice MaxBatchBody's default, 128 MiB, and
	// never under MaxBatchBody.
	MaxBodyMemory int64
	// BodyWait is how long a request waits for MaxBodyMemory before it is
	// answered 503 with Retry-After; default [DefaultBodyWait].
	BodyWait time.Duration
	// AllowOrigins are the browser origins ("http://localhost:3000")
	// allowed to write across origins (origin.go); New panics on one
	// [CheckOrigins] refuses.
	AllowOrigins []string
	// LoopbackHost refuses a request whose Host is not a loopback name
	// or address, nor one of Hosts: set it when the server listens on
	// loopback only, against DNS rebinding (origin.go).
	LoopbackHost bool
	// Hosts are names besides the loopback ones that LoopbackHost allows:
	// the listen address's, when it is a name.
	Hosts []string
	// Gatherer is served on /metrics; nil: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives internal errors (answers with status 500); nil:
	// slog.Default().
	Logger *slog.Logger
	// CheckPushTarget, when set, checks the URL of a policy's push
	// endpoint before the policy is set: an error wrapping
	// task.ErrInvalid is 400 and nothing changes (pusher.Targets.Check).
	CheckPushTarget func(url string) error
}

// Body limits besides the payload's.
const (
	// Envelope is what a put's body may hold beside its payload: an id of
	// 200 bytes, the other fields and generous whitespace.
	Envelope = 64 << 10
	// smallBody bounds the bodies that carry no payload (reserve, ack,
	// nack, touch, release, bury, kick, a policy, a pause).
	smallBody = 64 << 10
	// defaultBatchBody is Options.MaxBatchBody's default: a thousand
	// puts of 64 KiB each.
	defaultBatchBody = 64 << 20
)

// Server is the HTTP API's handler. It is safe for concurrent use by
// multiple goroutines, SetService and Drain included.
type Server struct {
	mux       *http.ServeMux
	token     []byte
	putBody   int64 // body limit of one put
	batchBody int64 // body limit of a batch
	log       *slog.Logger

	// The transport's limits (limits.go) and checks (origin.go).
	bodyTimeout  time.Duration
	bodyWait     time.Duration
	bodies       *budget
	origins      *http.CrossOriginProtection
	loopbackHost bool
	hosts        []string
	// checkPushTarget is Options.CheckPushTarget.
	checkPushTarget func(url string) error
	// patchMu is held by patchPolicy from its read of a policy to its
	// write, so that two patches on this server do not lose either.
	patchMu sync.Mutex

	// b holds the service once SetService is called; nil until then.
	b atomic.Pointer[serviceRef]
	// draining is set by Drain; drain is cancelled by it.
	draining    atomic.Bool
	drain       context.Context
	cancelDrain context.CancelFunc

	// patterns are those registered on mux, in order (handle): what
	// api/openapi.yaml must list (TestOpenAPIRoutes).
	patterns []string
}

// serviceRef boxes the Service interface for atomic.Pointer.
type serviceRef struct{ service.Service }

// New returns a Server that is not yet ready: call [Server.SetService]
// once the service has recovered.
func New(opts Options) *Server {
	s := &Server{
		mux:   http.NewServeMux(),
		token: []byte(opts.Token),
		log:   opts.Logger,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	maxPayload := opts.MaxPayload
	if maxPayload <= 0 {
		maxPayload = task.DefaultMaxPayload
	}
	s.putBody = int64(maxPayload) + Envelope
	s.batchBody = opts.MaxBatchBody
	if s.batchBody <= 0 {
		s.batchBody = defaultBatchBody
	}
	s.batchBody = max(s.batchBody, s.putBody)
	s.bodyTimeout = cmp.Or(opts.BodyTimeout, DefaultBodyTimeout)
	s.bodyWait = cmp.Or(opts.BodyWait, DefaultBodyWait)
	s.bodies = &budget{size: max(cmp.Or(opts.MaxBodyMemory, defaultBodyMemory), s.batchBody)}
	origins, err := newOriginCheck(opts.AllowOrigins)
	if err != nil {
		panic(errOriginOption)
	}
	s.origins = origins
	s.loopbackHost, s.hosts = opts.LoopbackHost, opts.Hosts
	s.checkPushTarget = opts.CheckPushTarget
	s.drain, s.cancelDrain = context.WithCancel(context.Background())

	gatherer := opts.Gatherer
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	s.handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.handle("GET /readyz", http.HandlerFunc(s.readyz))
	metrics := promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
	if !opts.MetricsWithoutToken {
		metrics = s.auth(metrics)
	}
	s.handle("GET /metrics", metrics)
	s.handle("GET /v1/openapi.json", http.HandlerFunc(s.openAPI))
	s.routeV1()
	s.handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errNoRoute)
	}))
	return s
}

// handle registers h for pattern on s's mux, and keeps the pattern: every
// route goes through here, so that the test of the OpenAPI document sees
// them all.
func (s *Server) handle(pattern string, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}

// route is one line of the API's table: a method and a path pattern of
// http.ServeMux, and the handler.
type route struct {
	method, path string
	h            func(http.ResponseWriter, *http.Request, service.Service)
}

// routes returns the /v1 API, one line per call (package api lists the
// same table with the bodies).
func (s *Server) routes() []route {
	return []route{
		{"POST", "/v1/queues/{queue}/tasks", s.put},
		{"POST", "/v1/queues/{queue}/tasks:batch", s.putBatch},
		{"GET", "/v1/queues/{queue}/tasks/{id}", s.get},
		{"DELETE", "/v1/queues/{queue}/tasks/{id}", s.delete},
		{"POST", "/v1/queues/{queue}/reserve", s.reserve},
		{"POST", "/v1/queues/{queue}/tasks/{id}/ack", s.ack},
		{"POST", "/v1/queues/{queue}/tasks/{id}/touch", s.touch},
		{"POST", "/v1/queues/{queue}/tasks/{id}/nack", s.nack},
		{"POST", "/v1/queues/{queue}/tasks/{id}/release", s.release},
		{"POST", "/v1/queues/{queue}/tasks/{id}/bury", s.bury},
		{"POST", "/v1/queues/{queue}/tasks/{id}/kick", s.kick},
		{"POST", "/v1/queues/{queue}/tasks/{id}/cancel", s.cancel},
		{"PUT", "/v1/queues/{queue}/policy", s.setPolicy},
		{"GET", "/v1/queues/{queue}/policy", s.policy},
		{"PATCH", "/v1/queues/{queue}/policy", s.patchPolicy},
		{"DELETE", "/v1/queues/{queue}/policy", s.deletePolicy},
		{"POST", "/v1/queues/{queue}/pause", s.pause},
		{"POST", "/v1/queues/{queue}/resume", s.resume},
		{"POST", "/v1/reserve", s.reserveQueues},
		{"POST", "/v1/acks", s.acks},
		{"POST", "/v1/leases:cancelled", s.cancelledLeases},
		{"GET", "/v1/queues", s.queues},
		{"PUT", "/v1/schedules/{name}", s.setSchedule},
		{"GET", "/v1/schedules", s.schedules},
		{"GET", "/v1/schedules/{name}", s.schedule},
		{"DELETE", "/v1/schedules/{name}", s.deleteSchedule},
		{"POST", "/v1/schedules/{name}/run", s.runSchedule},
		{"GET", "/v1/schedules/{name}/runs", s.scheduleRuns},
		{"POST", "/v1/schedules/{name}/pause", s.pauseSchedule},
		{"POST", "/v1/schedules/{name}/resume", s.resumeSchedule},
	}
}

// routeV1 registers the /v1 routes (the API's and the dashboard's, see
// observe.go, and the history's, history.go) behind the token and the
// readiness check, and for each path a method-less pattern that answers
// 405 in JSON for the other methods (ServeMux's own 405 is plain text).
func (s *Server) routeV1() {
	allowed := map[string][]string{}
	var paths []string
	for _, rt := range slices.Concat(s.routes(), s.observeRoutes(), s.historyRoutes(), s.bulkRoutes()) {
		s.handle(rt.method+" "+rt.path, s.v1(rt.h))
		if allowed[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
	}
	for _, p := range paths {
		methods := allowed[p]
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		s.handle(p, s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, errMethod)
		})))
	}
	s.handle("/v1/", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errNoRoute)
	})))
}

// v1 wraps a handler of the API: the token first, then readiness.
func (s *Server) v1(h func(http.ResponseWriter, *http.Request, service.Service)) http.Handler {
	return s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref := s.b.Load()
		if ref == nil {
			writeError(w, errNotReady)
			return
		}
		h(w, r, ref.Service)
	}))
}

// ServeHTTP answers one request: after the browser checks (origin.go)
// and the body's limits (limits.go), the route's handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.checkBrowser(r); err != nil {
		refuseBody(w, err)
		return
	}
	if hasBody(r) {
		release, err := s.admitBody(w, r)
		if err != nil {
			refuseBody(w, err)
			return
		}
		defer release()
	}
	s.mux.ServeHTTP(w, r)
}

// SetService makes s ready, serving the API over b. Call it once, after b
// has recovered; later calls replace the service.
func (s *Server) SetService(b service.Service) {
	if b == nil {
		panic("httpapi: SetService with a nil service")
	}
	s.b.Store(&serviceRef{b})
}

// Drain begins a shutdown: /readyz answers 503 from now on, and reserves
// waiting for tasks (and those that come later) stop waiting and answer
// with what they have. Other calls are served as before, so that
// http.Server.Shutdown can let them finish. Drain does not wait and may be
// called more than once.
func (s *Server) Drain() {
	s.draining.Store(true)
	s.cancelDrain()
}
