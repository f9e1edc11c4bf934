package beanstalk_test

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/internal/pipenet"
	"github.com/hourglass-go/hourglass/service"
)

// These tests run the server in virtual time (testing/synctest) over
// in-memory pipes, to check exactly when timed replies come: the safety
// margin, TTR expiry, timeouts longer than the broker's longest wait, and
// pauses. The TCP tests check the same replies on the wall clock, loosely.

// virtual runs f in a synctest bubble with a server over memstore, and
// shuts both down when f returns. dial opens a client connection.
func virtual(t *testing.T, f func(t *testing.T, dial func() *client)) {
	synctest.Test(t, func(t *testing.T) {
		b := openMem(t)
		l := pipenet.Listen()
		srv := beanstalk.NewServer(service.New(b), beanstalk.Options{})
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		var clients []*client
		dial := func() *client {
			a, err := l.Dial(context.Background(), "", "")
			if err != nil {
				t.Fatal(err)
			}
			c := &client{t: t, nc: a, r: newReader(a)}
			clients = append(clients, c)
			return c
		}
		defer func() { // also after t.Fatal in f
			for _, c := range clients {
				c.nc.Close()
			}
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
			<-served
		}()
		f(t, dial)
	})
}

// near reports whether got is want, or late by under 50 ms (a timing
// wheel's tick).
func near(got, want time.Duration) bool { return got >= want && got < want+50*time.Millisecond }

func since(start time.Time) time.Duration { return time.Since(start) }

func itoa64(id uint64) string { return strconv.FormatUint(id, 10) }

func newReader(nc net.Conn) *bufio.Reader { return bufio.NewReader(nc) }

func TestVirtual_DeadlineSoon(t *testing.T) {
	virtual(t, func(t *testing.T, dial func() *client) {
		c := dial()
		id := c.put(0, 0, 3, "t")
		start := time.Now()
		c.must("reserve", "RESERVED "+itoa64(id)+" 1\r\nt")
		// A waiting reserve answers when the last second begins.
		c.must("reserve", "DEADLINE_SOON")
		if got := since(start); !near(got, 2*time.Second) {
			t.Fatalf("DEADLINE_SOON after %v, want 2s", got)
		}
		// In the margin, at once.
		c.must("reserve-with-timeout 10", "DEADLINE_SOON")
		c.must("touch "+itoa64(id), "TOUCHED")
		start = time.Now()
		c.must("reserve-with-timeout 1", "TIMED_OUT")
		if got := since(start); !near(got, time.Second) {
			t.Fatalf("TIMED_OUT after %v, want 1s", got)
		}
		// Expiry: 3 s after the touch the job is ready again for another
		// connection.
		c.must("reserve", "DEADLINE_SOON")
		other := dial()
		other.send("reserve\r\n")
		if got := other.read(time.Minute); got != "RESERVED "+itoa64(id)+" 1\r\nt\r\n" {
			t.Fatalf("reserve of the expired job: %q", got)
		}
		if got := since(start); !near(got, 3*time.Second) {
			t.Fatalf("expired %v after the touch, want 3s", got)
		}
		st := other.do("stats-job " + itoa64(id))
		if yamlField(st, "timeouts") != "1" || yamlField(st, "reserves") != "2" {
			t.Fatalf("stats-job: %q", st)
		}
		c.must("delete "+itoa64(id), "NOT_FOUND")
		other.must("delete "+itoa64(id), "DELETED")
	})
}

func TestVirtual_LongWaits(t *testing.T) {
	virtual(t, func(t *testing.T, dial func() *client) {
		c := dial()
		start := time.Now()
		// Longer than the broker's longest wait (5 minutes).
		c.send("reserve-with-timeout 700\r\n")
		if got := c.read(time.Hour); got != "TIMED_OUT\r\n" {
			t.Fatalf("got %q", got)
		}
		if got := since(start); !near(got, 700*time.Second) {
			t.Fatalf("TIMED_OUT after %v, want 700s", got)
		}
		// A reserve with no timeout outwaits it too.
		c.send("reserve\r\n")
		time.Sleep(17 * time.Minute)
		p := dial()
		id := p.put(0, 0, 60, "late")
		if got := c.read(time.Hour); got != "RESERVED "+itoa64(id)+" 4\r\nlate\r\n" {
			t.Fatalf("got %q", got)
		}
		// A delayed job is handed out at its due time, to the second.
		start = time.Now()
		p.put(0, 30, 60, "due")
		c.send("reserve-with-timeout 60\r\n")
		if got := c.read(time.Hour); !strings.HasSuffix(got, "due\r\n") {
			t.Fatalf("got %q", got)
		}
		if got := since(start); !near(got, 30*time.Second) {
			t.Fatalf("delayed job handed out after %v, want 30s", got)
		}
	})
}

func TestVirtual_Pause(t *testing.T) {
	virtual(t, func(t *testing.T, dial func() *client) {
		c := dial()
		id := c.put(0, 0, 60, "p")
		start := time.Now()
		c.must("pause-tube default 45", "PAUSED")
		c.must("reserve-with-timeout 0", "TIMED_OUT")
		st := c.do("stats-tube default")
		if yamlField(st, "pause") != "45" || yamlField(st, "pause-time-left") != "45" {
			t.Fatalf("stats-tube: %q", st)
		}
		c.send("reserve\r\n")
		if got := c.read(time.Hour); got != "RESERVED "+itoa64(id)+" 1\r\np\r\n" {
			t.Fatalf("reserve: %q", got)
		}
		if got := since(start); !near(got, 45*time.Second) {
			t.Fatalf("reserved after %v of a 45s pause", got)
		}
		if st := c.do("stats-tube default"); yamlField(st, "pause") != "0" {
			t.Fatalf("stats-tube after the pause: %q", st)
		}
	})
}
