package pebblestore

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger passes Pebble's log lines to a [slog.Logger] and keeps the
// lines in which Pebble reports where it stopped replaying a write-ahead
// log, so that Open can repeat them when the store was not closed cleanly
// (see the package doc, "Crashes"). It is safe for concurrent use.
type pebbleLogger struct {
	log *slog.Logger

	mu sync.Mutex
	// replays holds Pebble's "WAL ... stopped reading at offset" lines.
	// Guarded by mu.
	replays []string
}

// replayMarker is the text of Pebble's line at the end of each WAL replay
// (open.go, replayWAL, in Pebble v2.1.7): "[JOB n] WAL 000005 stopped
// reading at offset: 1234; replayed 10 keys in 3 batches".
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

// Errorf logs a Pebble error line at level Error.
func (l *pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: "+strings.TrimSpace(fmt.Sprintf(format, args...)), "component", "pebble")
}

// Fatalf logs a Pebble fatal line at level Error and panics: Pebble calls
// it when it cannot go on (a failed WAL write in the commit pipeline, an
// invariant broken) and does not expect it to return. Its own default
// logger exits the process instead; a panic lets the caller's deferred
// code run and shows the stack.
func (l *pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + strings.TrimSpace(fmt.Sprintf(format, args...))
	l.log.Error(msg, "component", "pebble")
	panic("hourglass: " + msg)
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
// corruption is Fatalf), stalls and slow disks at Warn.
func eventListener(log *slog.Logger) *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			log.Error("pebble: background error", "component", "pebble", "err", err)
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("pebble: data corruption", "component", "pebble", "info", info.String())
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			log.Warn("pebble: disk slow", "component", "pebble", "info", info.String())
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			log.Warn("pebble: write stall", "component", "pebble", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			log.Info("pebble: write stall ended", "component", "pebble")
		},
	}
}
