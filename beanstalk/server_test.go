package beanstalk_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/task"
)

// TestCrossProtocol checks that a job put over the protocol is the
// broker's task of the same job id, under the HTTP id of its job id in
// decimal, and that a tube with characters queues do not allow is a
// queue all the same.
func TestCrossProtocol(t *testing.T) {
	t.Parallel()
	eachBackend(t, testCrossProtocol)
}

func testCrossProtocol(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
	ts := start(t, beanstalk.Options{})
	c := dial(t, ts.addr)
	c.must("use mail", "USING mail")
	id := c.put(7, 0, 30, "body")
	tk, err := ts.b.Get("mail", strconv.FormatUint(id, 10))
	if err != nil || tk.JobID != id || string(tk.Payload) != "body" || tk.Priority != 7 || tk.TTR != 30*time.Second {
		t.Fatalf("Get = %+v, %v", tk, err)
	}
	// Put over HTTP, reserved over the protocol.
	put, _, err := ts.b.Put(context.Background(), "mail", task.PutRequest{ID: "h1", Payload: []byte("http"), Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.must("watch mail", "WATCHING 2")
	if got := c.do("reserve-with-timeout 0"); got != fmt.Sprintf("RESERVED %d 4\r\nhttp\r\n", put.JobID) {
		t.Fatalf("reserve: %q", got)
	}
	c.must(fmt.Sprintf("delete %d", put.JobID), "DELETED")

	c.must("use a/b+c", "USING a/b+c")
	c.put(0, 0, 1, "x")
	found := false
	qs, _ := ts.b.Queues(context.Background())
	for _, q := range qs {
		found = found || q.Name == "-a_sb_pc" && q.Ready == 1
	}
	if !found {
		t.Fatalf("no queue -a_sb_pc with the job: %+v", qs)
	}
}

// itoa returns the job id of the ready job of queue with body body.
func itoa(b testBroker, queue, body string) string {
	t, err := b.Peek(queue, task.Ready)
	if err != nil || string(t.Payload) != body {
		return fmt.Sprintf("<%v %q>", err, t.Payload)
	}
	return strconv.FormatUint(t.JobID, 10)
}

// TestReserve covers what the differential test cannot time exactly: a
// reserve that waits for a put, one with no timeout, the release of a
// closed connection's jobs, and a half-closed connection; over each
// backend.
func TestReserve(t *testing.T) {
	t.Parallel()
	eachBackend(t, testReserve)
}

func testReserve(t *testing.T, start func(testing.TB, beanstalk.Options) *testServer) {
	ts := start(t, beanstalk.Options{})

	t.Run("WaitsForPut", func(t *testing.T) {
		t.Parallel()
		w := dial(t, ts.addr)
		w.must("watch wait", "WATCHING 2")
		w.send("reserve-with-timeout -1\r\n") // beanstalkd 1.12: no timeout
		time.Sleep(100 * time.Millisecond)
		p := dial(t, ts.addr)
		p.must("use wait", "USING wait")
		id := p.put(0, 0, 10, "w")
		if got, want := w.read(5*time.Second), fmt.Sprintf("RESERVED %d 1\r\nw\r\n", id); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})

	t.Run("CloseReleases", func(t *testing.T) {
		t.Parallel()
		a := dial(t, ts.addr)
		a.must("use closing", "USING closing")
		id := a.put(9, 0, 60, "c")
		a.must("watch closing", "WATCHING 2")
		a.must("ignore default", "WATCHING 1")
		if got := a.do("reserve"); !strings.HasPrefix(got, "RESERVED "+strconv.FormatUint(id, 10)) {
			t.Fatalf("reserve: %q", got)
		}
		a.nc.Close()
		b := dial(t, ts.addr)
		b.must("watch closing", "WATCHING 2")
		if got := b.do("reserve-with-timeout 5"); !strings.HasPrefix(got, "RESERVED "+strconv.FormatUint(id, 10)) {
			t.Fatalf("reserve after the holder closed: %q", got)
		}
		if st := b.do(fmt.Sprintf("stats-job %d", id)); yamlField(st, "pri") != "9" || yamlField(st, "timeouts") != "0" {
			t.Fatalf("stats-job: %q", st)
		}
	})

	t.Run("HalfClose", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		c.must("watch half", "WATCHING 2")
		c.must("ignore default", "WATCHING 1")
		c.send("reserve\r\n")
		time.Sleep(100 * time.Millisecond)
		c.nc.(*net.TCPConn).CloseWrite()
		if got := c.read(5 * time.Second); got != "TIMED_OUT\r\n" {
			t.Fatalf("reserve on a half-closed connection: %q", got)
		}
		if got := c.read(5 * time.Second); got != "<closed>" {
			t.Fatalf("after TIMED_OUT: %q", got)
		}
	})

	t.Run("DeletedOverHTTP", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		c.must("use gone", "USING gone")
		c.must("watch gone", "WATCHING 2")
		c.must("ignore default", "WATCHING 1")
		id := c.put(0, 0, 1, "g")
		c.do("reserve")
		// In the safety margin, a reserve answers DEADLINE_SOON; not once
		// the job is gone.
		c.must("reserve-with-timeout 0", "DEADLINE_SOON")
		if err := ts.b.Delete(context.Background(), "gone", strconv.FormatUint(id, 10)); err != nil {
			t.Fatal(err)
		}
		c.must("reserve-with-timeout 0", "TIMED_OUT")
	})

	t.Run("Pipelined", func(t *testing.T) {
		t.Parallel()
		c := dial(t, ts.addr)
		var b strings.Builder
		b.WriteString("use pipe\r\n")
		for i := range 50 {
			fmt.Fprintf(&b, "put 0 0 10 %d\r\n%s\r\n", len(strconv.Itoa(i)), strconv.Itoa(i))
		}
		b.WriteString("watch pipe\r\nignore default\r\n")
		for range 50 {
			b.WriteString("reserve-with-timeout 0\r\n")
		}
		c.send(b.String())
		if got := c.read(5 * time.Second); got != "USING pipe\r\n" {
			t.Fatal(got)
		}
		var ids []string
		for range 50 {
			id, ok := strings.CutPrefix(c.read(5*time.Second), "INSERTED ")
			if !ok {
				t.Fatal("no INSERTED")
			}
			ids = append(ids, strings.TrimSpace(id))
		}
		c.read(5 * time.Second)
		c.read(5 * time.Second)
		for i := range 50 {
			want := fmt.Sprintf("RESERVED %s %d\r\n%d\r\n", ids[i], len(strconv.Itoa(i)), i)
			if got := c.read(5 * time.Second); got != want {
				t.Fatalf("reserve %d: %q, want %q", i, got, want)
			}
		}
		// Puts taken together from the buffer stop at anything else.
		c.send("put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nbc\r\nput 0 0 10 1\r\nd\r\n" +
			"use pipe2\r\nput 0 0 10 1\r\ne\r\nput 0 0 10 70000\r\n" + strings.Repeat("f", 70002) +
			"put 0 0 10 1\r\ng\r\nlist-tube-used\r\n")
		for _, want := range []string{"INSERTED ", "EXPECTED_CRLF\r\n",
			"UNKNOWN_COMMAND\r\n", "UNKNOWN_COMMAND\r\n", // "\nput 0 0 10 1", then "d"
			"USING pipe2\r\n", "INSERTED ", "JOB_TOO_BIG\r\n", "INSERTED ", "USING pipe2\r\n"} {
			if got := c.read(5 * time.Second); !strings.HasPrefix(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		c.must("peek-ready", "FOUND "+itoa(ts.b, "pipe2", "e")+" 1\r\ne")
	})
}
