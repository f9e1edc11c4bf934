package httpapi

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What a client controls, and how each is bounded (issue 27):
//
//   - The time a request's body takes to arrive: Options.BodyTimeout from
//     the moment its headers are read (http.Server's ReadHeaderTimeout
//     bounds those). The bound is a read deadline on the connection, set
//     before the handler runs; net/http lifts it once the body has been
//     read to its end (it then reads on in the background, to see the
//     client go), so a long-poll reserve, whose answer may take its whole
//     wait, is not cut short. (http.Server.ReadTimeout would be: the
//     background read would time out and cancel the request's context.)
//     A body that is late answers 408 and closes the connection.
//   - The memory of the bodies being served at once: each request with a
//     body takes, from one budget of Options.MaxBodyMemory bytes, its
//     Content-Length (or, sent chunked, its route's limit) before it is
//     read, and gives it back when its answer is written. A batch costs
//     five to seven times its body in memory while it is served (the
//     body, the decoded tasks, the broker's requests, the answer), so
//     the default budget, two batches of 64 MiB, bounds them to under a
//     gigabyte, and batches sent at once are served a few at a time. A
//     request that finds the budget short waits up to Options.BodyWait,
//     first come first served, and then answers 503 with Retry-After,
//     without reading its body.
//     What a body holds is what has arrived, once it stalls: a body of
//     which no byte has come for bodyStall gives back the part of its
//     Content-Length not yet read, and from then on takes bytes from the
//     budget as they arrive (bodyChunk at a time, each waiting up to
//     BodyWait, or 503). So a client that declares large bodies and
//     sends nothing holds the budget for a second or two, not for the
//     body timeout, and cannot make every other request with a body
//     answer 503. A body that flows keeps its whole reservation, so that
//     large batches sent at once are still served a few at a time
//     rather than each holding part of the budget waiting for the rest.
//   - Connections: [LimitListener] bounds them below the process's file
//     descriptors, so that the store can still open its files, and
//     closes idle ones to make room for new ones (conns.go).
//
// A request with a body whose token is missing or wrong takes nothing
// from the budget, and its connection is closed after the answer (the
// 401, auth.go, or a probe's), its body unread.

// Defaults of the body limits.
const (
	// DefaultBodyTimeout is Options.BodyTimeout's default: a 64 MiB
	// batch must arrive at 1.1 MB/s or more.
	DefaultBodyTimeout = time.Minute
	// DefaultBodyWait is Options.BodyWait's default.
	DefaultBodyWait = 10 * time.Second
	// defaultBodyMemory is Options.MaxBodyMemory's default: two batches
	// of the largest size at once.
	defaultBodyMemory = 2 * defaultBatchBody
	// retryAfter is the Retry-After of a 503 for want of memory, seconds.
	retryAfter = 1
	// bodyStall is how long a body may send nothing before it holds only
	// what has arrived; it is found stalled within twice that.
	bodyStall = time.Second
	// bodyChunk is what a stalled body takes from the budget at a time
	// as more of it arrives.
	bodyChunk = 256 << 10
)

// Errors of the body limits.
var (
	errBusy = &wireError{http.StatusServiceUnavailable, "hourglass: too many request bodies in flight: retry later"}
	errSlow = &wireError{http.StatusRequestTimeout, "hourglass: the request body did not arrive in time"}
)

// hasBody reports whether r carries a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// admitBody sets the deadline of r's body and takes its memory from the
// budget: it returns the function that gives it back, or errBusy when
// the budget stayed short for Options.BodyWait. It replaces r.Body with
// one that answers a late body with errSlow.
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request) (release func(), err error) {
	if s.bodyTimeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)) == nil {
			r.Body = timedBody{r.Body}
		}
	}
	if ok, _ := s.authorized(r); !ok {
		// Answered unread: 401 on /v1, and the routes open without the
		// token read no body. The connection is closed after the answer,
		// or net/http would read up to 256 KiB of the body before
		// writing it, for as long as the client takes to send them: a
		// client without the token could hold connections busy for the
		// body timeout.
		closeUnread(w)
		return func() {}, nil
	}
	n := s.bodyWeight(r)
	ctx, cancel := context.WithTimeout(r.Context(), s.bodyWait)
	defer cancel()
	if err := s.bodies.acquire(ctx, n); err != nil {
		return nil, errBusy
	}
	b := &budgetedBody{ReadCloser: r.Body, s: s, w: w, ctx: r.Context(), weight: n, held: n}
	b.timer = time.AfterFunc(bodyStall, b.check)
	r.Body = b
	return b.release, nil
}

// bodyWeight is what r's body takes from the budget: its length, or its
// route's limit when it is sent chunked, and never more than that limit
// (a longer body is refused with 413 once the limit is read).
func (s *Server) bodyWeight(r *http.Request) int64 {
	limit := s.putBody // the largest body of any route but a batch
	if strings.HasSuffix(r.URL.Path, ":batch") {
		limit = s.batchBody
	}
	if r.ContentLength > 0 {
		return min(r.ContentLength, limit)
	}
	return limit
}

// refuseBody answers err to a request whose body is left unread, and
// closes its connection (closeUnread).
func refuseBody(w http.ResponseWriter, err error) {
	closeUnread(w)
	if err == errBusy {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeError(w, err)
}

// closeUnread makes the connection close after the answer, leaving the
// body unread: reading it to keep the connection would cost what refusing
// it saves. net/http would otherwise read up to 256 KiB of it once the
// handler returns, for as long as the client takes to send them, so the
// read deadline is set to now.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// timedBody is a request body under a read deadline: a read that fails
// for it answers errSlow, which the handlers answer 408.
type timedBody struct{ io.ReadCloser }

// Read reads the body.
func (b timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return n, errSlow
	}
	return n, err
}

// budgetedBody is a request body holding memory from the server's
// budget: its whole weight while it flows, and only what has arrived
// once it stalls (see the top of this file). Read is called by the
// handler's goroutine, check by its timer's, release once the answer is
// written.
type budgetedBody struct {
	io.ReadCloser
	s      *Server
	w      http.ResponseWriter
	ctx    context.Context // the request's
	weight int64           // what it took when admitted: its Content-Length or limit
	timer  *time.Timer     // runs check every bodyStall until it stalls

	mu sync.Mutex
	// read counts the bytes read, seen what check saw last time, held
	// the bytes taken from the budget; stalled is set once the body has
	// given back what had not arrived, done once release has run.
	// Guarded by mu.
	read, seen, held int64
	stalled, done    bool
}

// Read reads the body; once it has stalled, it takes what arrives from
// the budget, answering errBusy (503, the connection closed) when that
// is short for Options.BodyWait.
func (b *budgetedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n == 0 {
		return n, err
	}
	b.mu.Lock()
	b.read += int64(n)
	var more int64
	if b.stalled && !b.done && b.read > b.held {
		more = min(max(b.read-b.held, bodyChunk), max(b.weight, b.read)-b.held)
	}
	b.mu.Unlock()
	if more == 0 {
		return n, err
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.s.bodyWait)
	defer cancel()
	if b.s.bodies.acquire(ctx, more) != nil {
		closeUnread(b.w)
		b.w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		return n, errBusy
	}
	b.mu.Lock()
	if b.done { // the answer was written meanwhile
		b.mu.Unlock()
		b.s.bodies.release(more)
		return n, err
	}
	b.held += more
	b.mu.Unlock()
	return n, err
}

// check runs every bodyStall from admission: when no byte has been read
// since the last check, the body gives back what it holds beyond what
// it has read, and stops checking.
func (b *budgetedBody) check() {
	b.mu.Lock()
	if b.done || b.stalled {
		b.mu.Unlock()
		return
	}
	if b.read != b.seen {
		b.seen = b.read
		b.timer.Reset(bodyStall)
		b.mu.Unlock()
		return
	}
	b.stalled = true
	give := max(b.held-b.read, 0)
	b.held -= give
	b.mu.Unlock()
	b.s.bodies.release(give)
}

// release gives back what the body holds, once its answer is written.
func (b *budgetedBody) release() {
	b.timer.Stop()
	b.mu.Lock()
	held := b.held
	b.held, b.done = 0, true
	b.mu.Unlock()
	b.s.bodies.release(held)
}

// budget is a weighted semaphore of bytes: acquire takes n, waiting while
// the bytes free are fewer, in the order the waiters came; release gives
// them back. A request of more than the whole budget takes all of it. It
// is safe for concurrent use.
type budget struct {
	size int64
	mu   sync.Mutex
	// used and waiters (of *waiter, oldest first) are guarded by mu.
	used    int64
	waiters list.List
}

// waiter is one acquire waiting; ready is closed once its n is taken.
type waiter struct {
	n     int64
	ready chan struct{}
}

// acquire takes n bytes (at most the budget's size), waiting until they
// are free or ctx ends; it returns ctx's error then, having taken
// nothing.
func (b *budget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.size)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // taken as ctx ended: give it back
		b.used -= n
	default:
		b.waiters.Remove(e)
	}
	b.wake() // the first waiter may fit now that this one is gone
	return ctx.Err()
}

// release gives back n bytes taken by acquire (the same n).
func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= min(n, b.size)
	b.wake()
	b.mu.Unlock()
}

// wake hands the free bytes to the waiters in order, stopping at the
// first that does not fit. Called with mu held.
func (b *budget) wake() {
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*waiter)
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters.Remove(e)
		close(w.ready)
	}
}
