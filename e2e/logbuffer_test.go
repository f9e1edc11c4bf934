package e2e_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// logBuffer keeps a process's standard output and error, and notes the
// address of its "listening" log line. It is safe for concurrent use.
type logBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	scanned   int    // bytes of buf whose lines were looked at
	listen    string // the address logged, once seen
	listening chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{listening: make(chan struct{})} }

// Write keeps p and looks at every line it completes.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	for {
		rest := b.buf.Bytes()[b.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return len(p), nil
		}
		b.scanned += i + 1
		if b.listen != "" {
			continue
		}
		var e struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(rest[:i], &e) == nil && e.Msg == "listening" && e.Addr != "" {
			b.listen = e.Addr
			close(b.listening)
		}
	}
}

// addr returns the address of the "listening" line.
func (b *logBuffer) addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.listen
}

// String returns everything written so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// entries returns the JSON log lines written so far, decoded; other lines
// (a panic, the race detector) are left out.
func (b *logBuffer) entries() []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}
