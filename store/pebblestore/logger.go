package pebblestore

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger passes Pebble's log lines to a [slog.Logger] and keeps the
// lines in which Pebble reports where it stopped replaying a write-ahead
// log, so that Open can repeat them when the store was not closed cleanly
// (see the package doc, "Crashes"). Its error lines go through a
// [limiter]. It is safe for concurrent use.
type pebbleLogger struct {
	log    *slog.Logger
	errors *limiter

	mu sync.Mutex
	// replays holds Pebble's "WAL ... stopped reading at offset" lines.
	// Guarded by mu.
	replays []string
}

// replayMarker is the text of Pebble's line at the end of each WAL replay
// (open.go, replayWAL, in Pebble v2.1.7): "[JOB 1] WAL 000004:
// {(dir,000)} stopped reading at offset: (dir/000004.log: 35265);
// replayed 145 keys in 29 batches".
const replayMarker = "stopped reading at offset"

// Infof logs a Pebble information line at level Info.
func (l *pebbleLogger) Infof(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	if strings.Contains(msg, replayMarker) {
		l.mu.Lock()
		l.replays = append(l.replays, msg)
		l.mu.Unlock()
	}
	l.log.Info("pebble: "+msg, "component", "pebble")
}

// Errorf logs a Pebble error line at level Error, unless l.errors holds
// it back.
func (l *pebbleLogger) Errorf(format string, args ...any) {
	if ok, held := l.errors.allow(time.Now()); ok {
		l.log.Error("pebble: "+strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "pebble", "suppressed", held)
	}
}

// Fatalf logs a Pebble fatal line at level Error and panics with a
// *fatalError: Pebble calls it when it cannot go on (a failed WAL write in
// the commit pipeline, a failed MANIFEST write, an invariant broken) and
// does not expect it to return. Its own default logger exits the process
// instead; a panic lets the caller's deferred code run and shows the
// stack, and Open turns one raised while Pebble opens into its error (see
// recoverFatal).
func (l *pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...))
	l.log.Error(msg, "component", "pebble")
	fe := &fatalError{msg: msg}
	for _, a := range args {
		if err, ok := a.(error); ok {
			fe.err = err
			break
		}
	}
	panic(fe)
}

// fatalError is what Fatalf panics with: Pebble's message ("pebble:
// ...", which Open's error prefixes), wrapping the first error among its
// arguments (so that errors.Is finds ENOSPC in a failed MANIFEST write on
// a full disk).
type fatalError struct {
	msg string
	err error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.err }

// recoverFatal calls f and returns its error, or the *fatalError of a
// Fatalf that panicked on f's goroutine; other panics go on. Pebble's Open
// releases what it holds (its lock, files, memory) before passing a panic
// on, so that a failed MANIFEST write on a full disk while Pebble opens is
// an error, and Open may be tried again. A Fatalf on one of Pebble's own
// goroutines (a flush) still ends the process.
func recoverFatal(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
	}()
	return f()
}

// takeReplays returns the replay lines logged so far and forgets them.
func (l *pebbleLogger) takeReplays() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.replays
	l.replays = nil
	return r
}

// eventListener returns the Pebble events the store logs: background
// errors and detected corruption at Error (Pebble's default for
// corruption is Fatalf), stalls and slow disks at Warn, each kind through
// its own [limiter]. Errors are logged by their text: slog would print a
// Pebble error with %+v, stack traces included (kilobytes a line). After
// each background error it waits out bo (see [backoff]).
func eventListener(log *slog.Logger, bo *backoff) *pebble.EventListener {
	background, corruption, slow, stall := newLimiter(), newLimiter(), newLimiter(), newLimiter()
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if ok, held := background.allow(time.Now()); ok {
				log.Error("pebble: background error", "component", "pebble", "err", err.Error(), "suppressed", held)
			}
			bo.wait(time.Now())
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			if ok, held := corruption.allow(time.Now()); ok {
				log.Error("pebble: data corruption", "component", "pebble", "info", info.String(), "suppressed", held)
			}
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			if ok, held := slow.allow(time.Now()); ok {
				log.Warn("pebble: disk slow", "component", "pebble", "info", info.String(), "suppressed", held)
			}
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			if ok, held := stall.allow(time.Now()); ok {
				log.Warn("pebble: write stall", "component", "pebble", "reason", info.Reason, "suppressed", held)
			}
		},
		WriteStallEnd: func() {
			log.Info("pebble: write stall ended", "component", "pebble")
		},
	}
}

// Rate of the log lines of one kind (a [limiter]): a burst of
// logBurst, then one every logEvery. A disk that stays full makes Pebble
// retry its flush without pause (Pebble v2.1.7, compaction.go, DB.flush:
// "TODO(peter): count consecutive flush errors and backoff"): without the
// limit each failure would log a line with a stack trace, megabytes of
// log a second (issue 27).
const (
	logBurst = 5
	logEvery = time.Second
)

// limiter is a token bucket over log lines: it lets logBurst lines
// through at once and one more per logEvery, and counts the lines it
// holds back, which the next line let through reports. It is safe for
// concurrent use.
type limiter struct {
	mu sync.Mutex
	// tokens is the lines that may pass now, as of last; held counts the
	// lines held back since the last one let through. Guarded by mu.
	tokens float64
	last   time.Time
	held   int
}

func newLimiter() *limiter { return &limiter{tokens: logBurst} }

// allow reports whether a line at now may be logged and, if so, how many
// were held back before it.
func (l *limiter) allow(now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		l.tokens = min(logBurst, l.tokens+float64(now.Sub(l.last))/float64(logEvery))
	}
	l.last = now
	if l.tokens < 1 {
		l.held++
		return false, 0
	}
	l.tokens--
	held, l.held = l.held, 0
	return true, held
}

// Bounds of the wait after a background error (a [backoff]): it starts at
// backoffMin and doubles with each error that follows within
// backoffReset of the last, up to backoffMax. On a full disk a flush
// fails within milliseconds, so at backoffMax the retries take a small
// part of a core instead of a whole one, and a flush is retried within
// backoffMax of space being freed.
const (
	backoffMin   = 10 * time.Millisecond
	backoffMax   = time.Second
	backoffReset = 2 * backoffMax
)

// backoff is the wait after each of Pebble's background errors. Pebble
// retries a failed flush at once and forever, and offers no hook other
// than its EventListener, which it calls from the flushing goroutine
// holding the database's mutex: the wait holds back that retry, and
// with it the operations that need the mutex (a memtable switch, a
// snapshot, Metrics, Close), for at most backoffMax. Reads of the store
// need no mutex and go on. stop ends the waits, for Close. It is safe for
// concurrent use.
type backoff struct {
	mu sync.Mutex
	// next is the next wait, and last the time of the last error. Guarded
	// by mu.
	next time.Duration
	last time.Time

	stopOnce sync.Once
	stopped  chan struct{}
}

func newBackoff() *backoff { return &backoff{next: backoffMin, stopped: make(chan struct{})} }

// wait sleeps after an error at now, for longer the more errors came in
// a row, until stop.
func (b *backoff) wait(now time.Time) {
	b.mu.Lock()
	if now.Sub(b.last) > backoffReset {
		b.next = backoffMin
	}
	d := b.next
	b.next = min(2*b.next, backoffMax)
	b.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.stopped:
	}
	b.mu.Lock()
	b.last = time.Now()
	b.mu.Unlock()
}

// stop ends every wait, now and later.
func (b *backoff) stop() { b.stopOnce.Do(func() { close(b.stopped) }) }
