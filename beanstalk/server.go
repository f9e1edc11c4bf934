package beanstalk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/service"
)

// Options are a [Server]'s limits and collaborators. Zero fields take the
// defaults named on each.
type Options struct {
	// MaxJobSize is the largest job body a put may declare, in bytes
	// (beanstalkd's -z); default 65535, as beanstalkd. A body the broker
	// refuses as too large (over broker.Config.MaxPayload) is answered
	// JOB_TOO_BIG as well.
	MaxJobSize int
	// MaxConns bounds the open connections. At the limit, a new
	// connection closes the one that has waited longest for a command
	// while holding no reservation (its client may reconnect, as after
	// any close); when none does, the new one is closed at once.
	// Default 16384; negative: no bound.
	MaxConns int
	// BodyTimeout bounds the time a put's body may take to arrive after
	// its command line (body.go); a connection whose body is late is
	// closed, and nothing is put. Default 30 s; negative: no bound, as
	// beanstalkd.
	BodyTimeout time.Duration
	// Version is reported by the stats command; default "hourglass".
	Version string
	// Logger receives the server's errors; default slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultMaxJobSize = 1<<16 - 1
	DefaultMaxConns   = 1 << 14
	// DefaultBodyTimeout is long enough for the largest body over a slow
	// link (1 MiB at 64 KB/s takes 16 s).
	DefaultBodyTimeout = 30 * time.Second
)

// The back-off of the accept loop after a transient failure (out of
// file descriptors): from acceptBase doubling to acceptMax, as net/http's.
const (
	acceptBase = 5 * time.Millisecond
	acceptMax  = time.Second
)

// ErrServerClosed is returned by [Server.Serve] after [Server.Shutdown].
var ErrServerClosed = errors.New("hourglass: beanstalk server closed")

// Server serves the beanstalkd protocol over a broker. Make one with
// [NewServer], give it listeners with [Server.Serve] and stop it with
// [Server.Shutdown]. Server is safe for concurrent use.
type Server struct {
	b     service.Service
	opts  Options
	log   *slog.Logger
	tubes *tubes
	stats serverStats

	// ctx ends at Shutdown: blocked reserves return.
	ctx    context.Context
	cancel context.CancelFunc

	draining atomic.Bool

	mu sync.Mutex
	// listeners being served and connections open. Guarded by mu.
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	// shutdown is set by Shutdown, under mu.
	shutdown atomic.Bool
	// evicting counts the connections closed by track whose goroutines
	// have not ended yet; they do not count against MaxConns. Guarded by
	// mu.
	evicting int
	// refused and evicted count the connections refused at MaxConns and
	// the idle ones closed for new ones since refusedLog, when that was
	// last logged. Guarded by mu.
	refused, evicted int
	refusedLog       time.Time

	// wg counts connection goroutines.
	wg sync.WaitGroup
}

// serverStats are the server-wide counters of the stats command.
type serverStats struct {
	started time.Time
	id      string // random, per process start, as beanstalkd's "id"

	cmds               [numOps]atomic.Uint64
	conns, totalConns  atomic.Int64
	producers, workers atomic.Int64
	waiting            atomic.Int64
	// jobs counts the jobs put over this server (total-jobs).
	jobs atomic.Uint64
}

// NewServer returns a server of b's queues, on either engine. It does
// not own b: shut the server down before closing b.
func NewServer(b service.Service, opts Options) *Server {
	if opts.MaxJobSize <= 0 {
		opts.MaxJobSize = DefaultMaxJobSize
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.Version == "" {
		opts.Version = "hourglass"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	s := &Server{
		b:         b,
		opts:      opts,
		log:       opts.Logger,
		tubes:     newTubes(),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	s.stats.started = time.Now()
	s.stats.id = hex.EncodeToString(id[:])
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Serve accepts connections on l and serves each on its own goroutine
// until l fails or the server shuts down; then it closes l and returns
// ErrServerClosed, or l's error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.shutdown.Load() {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	backoff := retry.Backoff{Base: acceptBase, Max: acceptMax}
	failures := retry.NewFailureLog(s.log, "hourglass: beanstalk: accepting connections failed; retrying", "hourglass: beanstalk: accepting connections works again")
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors or a transient failure: wait, as
				// net/http does, rather than spin; a Shutdown ends the
				// wait.
				d := backoff.Next()
				failures.Failed(err, "retry_in", d)
				t := time.NewTimer(d)
				select {
				case <-s.ctx.Done():
					t.Stop()
				case <-t.C:
				}
				continue
			}
			return err
		}
		if backoff.Failures() > 0 {
			backoff.Reset()
			failures.OK()
		}
		c, ok := s.track(nc)
		if !ok {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// track registers a new connection and reports false when the server is
// shutting down or full. At MaxConns it first closes the connection
// idle the longest without a reservation (Options.MaxConns), in O(open
// connections).
func (s *Server) track(nc net.Conn) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown.Load() {
		return nil, false
	}
	if s.opts.MaxConns > 0 && len(s.conns)-s.evicting >= s.opts.MaxConns && !s.evictIdle() {
		s.refused++
		s.logLimit()
		return nil, false
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.stats.conns.Add(1)
	s.stats.totalConns.Add(1)
	return c, true
}

// evictIdle closes the connection that has waited longest for a command
// while holding no reservation, and reports whether there was one.
// Called with mu held.
func (s *Server) evictIdle() bool {
	for range 3 { // a connection found idle may begin a command meanwhile
		var oldest *conn
		var since int64
		for c := range s.conns {
			if c.evicted || c.state.Load() != connIdle {
				continue
			}
			if t := c.idleSince.Load(); t != 0 && (oldest == nil || t < since) {
				oldest, since = c, t
			}
		}
		if oldest == nil {
			return false
		}
		if oldest.closeIfIdle() { // else it has just begun a command
			oldest.evicted = true
			s.evicting++
			s.evicted++
			s.logLimit()
			return true
		}
	}
	return false
}

// logLimit logs the connections refused and closed at MaxConns, at most
// once a second. Called with mu held.
func (s *Server) logLimit() {
	now := time.Now()
	if now.Sub(s.refusedLog) < time.Second {
		return
	}
	if s.refused > 0 {
		s.log.Warn("hourglass: beanstalk: connections refused: at the limit, none idle without a reservation", "max_conns", s.opts.MaxConns, "refused", s.refused)
	}
	if s.evicted > 0 {
		s.log.Info("hourglass: beanstalk: connections at the limit: idle ones closed for new ones", "max_conns", s.opts.MaxConns, "closed", s.evicted)
	}
	s.refusedLog, s.refused, s.evicted = now, 0, 0
}

// forget unregisters c when its goroutine ends.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.evicted {
		s.evicting--
	}
	s.mu.Unlock()
	s.stats.conns.Add(-1)
	s.wg.Done()
}

// closing reports whether Shutdown has begun.
func (s *Server) closing() bool { return s.shutdown.Load() }

// Drain puts the server in drain mode, as SIGUSR1 does to beanstalkd:
// puts are answered DRAINING, and everything else is served as before.
// The stats command reports "draining: true". It cannot be undone.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops the server gracefully: it drains (see [Server.Drain]),
// closes the listeners, closes every connection waiting for a command or
// blocked in a reserve, lets each command being served finish and send
// its reply, then closes that connection too. Jobs reserved over a closed
// connection are released, as beanstalkd does. Shutdown returns when
// every connection's goroutine has ended; if ctx ends first, it closes
// the remaining connections, waits for their goroutines (a write being
// committed still completes) and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	s.shutdown.Store(true)
	s.cancel()
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.closeIfIdle()
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}
