package beanstalk_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
)

// TestPut_HalfSentBodies sends many puts that declare a body of 1 MiB and
// send one byte of it. The heap must follow the bytes received, not the
// sizes declared (200 MiB here), and each connection must be closed once
// its body is late by Options.BodyTimeout. Not parallel: it measures the
// process's heap.
func TestPut_HalfSentBodies(t *testing.T) {
	const (
		conns    = 200
		declared = 1 << 20
		timeout  = 2 * time.Second
		// heapBound is what the half-sent puts may add to the heap: 200
		// buffers of the first chunk, the connections and their
		// goroutines come to about 5 MiB; the declared sizes to 200 MiB.
		heapBound = 40 << 20
	)
	ts := start(t, beanstalk.Options{MaxJobSize: declared, BodyTimeout: timeout})
	stats := dial(t, ts.addr)
	before := heapInUse()

	clients := make([]*client, conns)
	sent := time.Now()
	for i := range clients {
		clients[i] = dial(t, ts.addr)
		clients[i].send(fmt.Sprintf("put 0 0 1 %d\r\nx", declared))
	}
	// The server counts a put when it has read its line, before its body.
	deadline := time.Now().Add(10 * time.Second)
	for yamlField(stats.do("stats"), "cmd-put") != fmt.Sprint(conns) {
		if time.Now().After(deadline) {
			t.Fatalf("the server read %s put lines of %d", yamlField(stats.do("stats"), "cmd-put"), conns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if grew := int64(heapInUse()) - int64(before); grew > heapBound {
		t.Errorf("%d half-sent puts of %d bytes grew the heap by %d MiB, over %d MiB", conns, declared, grew>>20, heapBound>>20)
	}

	// Each connection is closed by the body timeout, none before it.
	for i, c := range clients {
		got := c.read(time.Until(sent.Add(timeout + 5*time.Second)))
		if got != "<closed>" {
			t.Fatalf("connection %d: got %q, want it closed within %v of its put", i, trim(got), timeout)
		}
	}
	if took := time.Since(sent); took < timeout {
		t.Errorf("connections closed after %v, before the body timeout of %v", took, timeout)
	}
	// Nothing was put, and the server still serves.
	if got := yamlField(stats.do("stats"), "current-jobs-ready"); got != "0" {
		t.Errorf("current-jobs-ready = %s, want 0", got)
	}
}

// TestPut_BodyInPieces puts a body that arrives in pieces, slower than
// the first chunk of its buffer fills, and within the body timeout.
func TestPut_BodyInPieces(t *testing.T) {
	t.Parallel()
	ts := start(t, beanstalk.Options{MaxJobSize: 1 << 20, BodyTimeout: 5 * time.Second})
	c := dial(t, ts.addr)
	body := strings.Repeat("0123456789abcdef", 40000) // 640,000 bytes
	c.send(fmt.Sprintf("put 1 0 30 %d\r\n", len(body)))
	for rest := body; rest != ""; {
		n := min(len(rest), 100_000)
		c.send(rest[:n])
		rest = rest[n:]
		time.Sleep(20 * time.Millisecond)
	}
	c.send("\r\n")
	var id uint64
	if got := c.read(5 * time.Second); !strings.HasPrefix(got, "INSERTED ") {
		t.Fatalf("put: got %q", trim(got))
	} else {
		fmt.Sscanf(got, "INSERTED %d", &id)
	}
	got := c.do(fmt.Sprintf("peek %d", id))
	if want := fmt.Sprintf("FOUND %d %d\r\n%s\r\n", id, len(body), body); got != want {
		t.Fatalf("peek: got %q, want the body put", trim(got))
	}
	// A body whose CR-LF is missing is still answered EXPECTED_CRLF.
	c.send("put 0 0 1 3\r\nabcde")
	if got := c.read(5 * time.Second); got != "EXPECTED_CRLF\r\n" {
		t.Fatalf("put without CR-LF: got %q", got)
	}
}

// heapInUse returns the heap's bytes in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
