package cluster

import (
	"context"
	"errors"
	"github.com/hourglass-go/hourglass/internal/retry"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listener holds the node's LISTEN connection: a connection of its own,
// outside the pool, that waits for notifications and between waits runs
// the LISTEN and UNLISTEN commands the node asks for. When the connection
// is lost, notifications sent meanwhile are lost with it: on reconnecting
// it listens again to every channel and the node resynchronises (wakes
// its reservers, reloads its timers), so a lost notification delays, and
// never loses, a task.
type listener struct {
	cfg      *pgx.ConnConfig
	dispatch func(*pgconn.Notification) // on the listener's goroutine
	resync   func()                     // after a reconnection
	log      *slog.Logger
	done     chan struct{}

	mu sync.Mutex
	// channels listened to (or to be, after a reconnect). Guarded by mu.
	channels map[string]bool
	// cmds waiting to run, and the cancel of the current wait. Guarded by
	// mu.
	cmds      []listenCmd
	interrupt context.CancelFunc
	closed    bool
}

type listenCmd struct {
	listen   bool
	channels []string
	done     chan error
}

// newListener connects the listener with cfg and starts its goroutine,
// which passes each notification to dispatch and calls resync after a
// lost connection came back.
func newListener(ctx context.Context, cfg *pgx.ConnConfig, dispatch func(*pgconn.Notification), resync func(), log *slog.Logger) (*listener, error) {
	l := &listener{cfg: cfg, dispatch: dispatch, resync: resync, log: log, done: make(chan struct{}), channels: make(map[string]bool)}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, dbErr(err)
	}
	go l.run(conn)
	return l, nil
}

// listen makes the node listen to channels and returns once it does:
// every notification committed after listen returns reaches the node.
func (l *listener) listen(ctx context.Context, channels ...string) error {
	return l.command(ctx, true, channels)
}

// unlisten stops listening to channels, without waiting.
func (l *listener) unlisten(channels ...string) {
	l.command(context.TODO(), false, channels)
}

func (l *listener) command(ctx context.Context, listen bool, channels []string) error {
	c := listenCmd{listen: listen, channels: channels, done: make(chan error, 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return errClosedListener
	}
	l.cmds = append(l.cmds, c)
	if l.interrupt != nil {
		l.interrupt()
	}
	l.mu.Unlock()
	if ctx == nil {
		return nil
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-l.done:
		return errClosedListener
	}
}

var errClosedListener = errors.New("hourglass: listener closed")

// timeout bounds each command and reconnection of the listener: the
// connect timeout of its configuration, which the node's pool has set
// to the node's database timeout (ConfigurePool, hourglass serve's
// --db-timeout), else 10 s.
func (l *listener) timeout() time.Duration {
	if l.cfg.ConnectTimeout > 0 {
		return l.cfg.ConnectTimeout
	}
	return 10 * time.Second
}

// close stops the listener and closes its connection.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return
	}
	l.closed = true
	if l.interrupt != nil {
		l.interrupt()
	}
	l.mu.Unlock()
	<-l.done
}

// run is the listener's goroutine.
func (l *listener) run(conn *pgx.Conn) {
	defer close(l.done)
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	backoff := retry.Backoff{Base: 10 * time.Millisecond, Max: time.Second}
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		cmds := l.cmds
		l.cmds = nil
		l.mu.Unlock()

		if conn == nil {
			conn = l.reconnect()
			if conn == nil {
				l.fail(cmds)
				time.Sleep(backoff.Next())
				continue
			}
			backoff.Reset()
		}
		if !l.execute(conn, cmds) {
			conn.Close(context.Background())
			conn = nil
			continue
		}

		ctx, cancel := context.WithCancel(context.Background())
		l.mu.Lock()
		if len(l.cmds) > 0 || l.closed {
			cancel()
		}
		l.interrupt = cancel
		l.mu.Unlock()
		note, err := conn.WaitForNotification(ctx)
		l.mu.Lock()
		l.interrupt = nil
		l.mu.Unlock()
		cancel()
		switch {
		case err == nil:
			l.dispatch(note)
		case ctx.Err() != nil && !conn.IsClosed():
			// Interrupted for a command or for close.
		default:
			l.log.Warn("hourglass: listen connection lost; reconnecting", "err", err)
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// execute runs cmds on conn and reports whether conn is still usable.
func (l *listener) execute(conn *pgx.Conn, cmds []listenCmd) bool {
	for i, c := range cmds {
		var b strings.Builder
		l.mu.Lock()
		for _, ch := range c.channels {
			if c.listen {
				l.channels[ch] = true
				b.WriteString("LISTEN ")
			} else {
				delete(l.channels, ch)
				b.WriteString("UNLISTEN ")
			}
			b.WriteString(pgx.Identifier{ch}.Sanitize())
			b.WriteString(";")
		}
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout())
		_, err := conn.Exec(ctx, b.String())
		cancel()
		c.done <- err
		if err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				l.fail(cmds[i+1:])
				return false
			}
		}
	}
	return true
}

// fail answers cmds that could not run for want of a connection. Their
// channels are recorded: the next connection listens to them.
func (l *listener) fail(cmds []listenCmd) {
	for _, c := range cmds {
		l.mu.Lock()
		for _, ch := range c.channels {
			if c.listen {
				l.channels[ch] = true
			} else {
				delete(l.channels, ch)
			}
		}
		l.mu.Unlock()
		c.done <- errClosedListener
	}
}

// reconnect opens a new connection, listens to every recorded channel and
// has the node resynchronise; nil when the database cannot be reached.
func (l *listener) reconnect() *pgx.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout())
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil
	}
	var b strings.Builder
	l.mu.Lock()
	for ch := range l.channels {
		b.WriteString("LISTEN " + pgx.Identifier{ch}.Sanitize() + ";")
	}
	l.mu.Unlock()
	if b.Len() > 0 {
		if _, err := conn.Exec(ctx, b.String()); err != nil {
			conn.Close(ctx)
			return nil
		}
	}
	l.resync()
	return conn
}

// count returns how many channels the node listens to (or will, on its
// next connection). O(1).
func (l *listener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.channels)
}
