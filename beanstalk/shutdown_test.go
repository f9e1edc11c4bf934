package beanstalk_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestDrain checks drain mode: puts are answered DRAINING, everything
// else is served.
func TestDrain(t *testing.T) {
	t.Parallel()
	ts := start(t, beanstalk.Options{})
	c := dial(t, ts.addr)
	id := c.put(0, 0, 10, "before")
	ts.srv.Drain()
	c.send("put 0 0 10 5\r\nafter\r\n")
	if got := c.read(5 * time.Second); got != "DRAINING\r\n" {
		t.Fatalf("put while draining: %q", got)
	}
	if got := c.do("reserve-with-timeout 0"); !strings.HasPrefix(got, "RESERVED ") {
		t.Fatalf("reserve while draining: %q", got)
	}
	if got := c.do("stats"); yamlField(got, "draining") != "true" {
		t.Fatalf("stats: draining %q", yamlField(got, "draining"))
	}
	c.must("delete "+strconv.FormatUint(id, 10), "DELETED")
}

// TestShutdown checks a graceful shutdown: idle and waiting connections
// are closed, a command in flight is answered first, reserved jobs are
// released, and Serve returns.
func TestShutdown(t *testing.T) {
	t.Parallel()
	b, srv, addr, served := unmanaged(t)

	idle := dial(t, addr)
	idle.must("list-tube-used", "USING default")
	holder := dial(t, addr)
	id := holder.put(3, 0, 60, "held")
	if got := holder.do("reserve"); !strings.HasPrefix(got, "RESERVED ") {
		t.Fatal(got)
	}
	waiter := dial(t, addr)
	waiter.must("watch empty", "WATCHING 2")
	waiter.must("ignore default", "WATCHING 1")
	waiter.send("reserve\r\n")
	midput := dial(t, addr)
	midput.send("put 0 0 10 4\r\nha")
	time.Sleep(100 * time.Millisecond)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	for _, c := range []*client{idle, holder, waiter} {
		if got := c.read(5 * time.Second); got != "<closed>" {
			t.Errorf("idle or waiting connection at Shutdown: %q", got)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a put in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	midput.send("lf\r\n")
	if got := midput.read(5 * time.Second); got != "DRAINING\r\n" {
		t.Errorf("put in flight at Shutdown: %q", got)
	}
	if got := midput.read(5 * time.Second); got != "<closed>" {
		t.Errorf("after the put: %q", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, beanstalk.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if tk, err := service.New(b).Job(id); err != nil || tk.State != task.Ready || tk.Priority != 3 {
		t.Fatalf("the held job after Shutdown: %+v, %v", tk, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(l); !errors.Is(err, beanstalk.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// TestShutdown_Deadline checks that Shutdown gives up on a client that
// stalls mid-command when its context ends, closing the connection.
func TestShutdown_Deadline(t *testing.T) {
	t.Parallel()
	b, srv, addr, _ := unmanaged(t)
	c := dial(t, addr)
	c.send("put 0 0 10 100\r\nstalled")
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the context's deadline", err)
	}
	if got := c.read(5 * time.Second); got != "<closed>" {
		t.Fatalf("the stalled connection: %q", got)
	}
	if _, err := service.New(b).Peek("default", task.Ready); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("a job of the stalled put: %v", err)
	}
}
