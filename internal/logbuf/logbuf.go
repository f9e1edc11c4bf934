// Package logbuf keeps what a logger writes for a test to read: the
// output of a server whose goroutines log concurrently with the test.
package logbuf

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use. The zero Buffer is
// empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

// Write appends p. O(len(p)).
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far. O(its length).
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a logger that writes to b in slog's text format.
func (b *Buffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
