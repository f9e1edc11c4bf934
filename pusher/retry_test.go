package pusher_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/internal/logbuf"
	"github.com/hourglass-go/hourglass/internal/pipenet"
	"github.com/hourglass-go/hourglass/pusher"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// cutOff is a service whose reserves (if reserves is set) or reads of
// the queues (if queues is) fail while down is set: a database out of
// reach, as the pusher sees it. With touches set, touches fail too.
type cutOff struct {
	*withPush
	reserves, queues, touches bool

	mu    sync.Mutex
	down  bool // guarded by mu
	calls int  // the calls that failed; guarded by mu
}

// fails reports whether a call that cut says is cut off fails now, and
// counts it.
func (c *cutOff) fails(cut bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down && cut {
		c.calls++
		return true
	}
	return false
}

var errOutOfReach = errors.New("hourglass: closed: the database is out of reach")

func (c *cutOff) ReserveQueues(ctx context.Context, queues []string, n int, wait time.Duration) ([]task.Task, error) {
	if c.fails(c.reserves) {
		return nil, errOutOfReach
	}
	return c.withPush.ReserveQueues(ctx, queues, n, wait)
}

func (c *cutOff) Touch(ctx context.Context, queue, id, lease string) (task.Task, error) {
	if c.fails(c.touches) {
		return task.Task{}, errOutOfReach
	}
	return c.withPush.Touch(ctx, queue, id, lease)
}

func (c *cutOff) Queues(ctx context.Context) ([]task.QueueStats, error) {
	if c.fails(c.queues) {
		return nil, errOutOfReach
	}
	return c.withPush.Queues(ctx)
}

// TestPusher_ReserveBacksOff: reserves that keep failing are retried
// after a back-off (about 7 tries in 10 s, not one per free slot at
// every turn), logged about once a second with the count of failures,
// and once when reserving works again.
func TestPusher_ReserveBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t)
		var out logbuf.Buffer
		log := out.Logger()
		s := &cutOff{withPush: &withPush{Service: service.New(b), ends: map[string]*task.Push{"q": {URL: "http://127.0.0.1:1/hook"}}}, reserves: true, down: true}
		if _, _, err := s.Put(context.Background(), "q", task.PutRequest{ID: "a"}); err != nil {
			t.Fatal(err)
		}
		p := pusher.New(s, pusher.Options{Logger: log, Refresh: time.Hour})
		p.Start()
		time.Sleep(10 * time.Second)
		s.mu.Lock()
		tries := s.calls
		s.down = false
		s.mu.Unlock()
		time.Sleep(6 * time.Second) // the back-off under way, then a reserve of "a"
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		// 0.1, 0.2, 0.4 … 5 s apart (±20 %): about 7 in 10 s.
		if tries < 5 || tries > 9 {
			t.Errorf("%d reserves in 10 s of failures, want about 7", tries)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 || !strings.Contains(lines[0], "reserving failed") || !strings.Contains(lines[0], "failures=1") {
			t.Fatalf("log:\n%s\nwant the first failure with its count", out.String())
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "reserving works again") || !strings.Contains(last, "failures=") {
			t.Errorf("last line %q, want the recovery with the count", last)
		}
	})
}

// TestPusher_RefreshBacksOff: with a refresh every 10 ms, reads of the
// push queues that keep failing are tried after a back-off (about 7 in
// 10 s, not 1,000), logged about once a second with a count, and once
// when reading works again.
func TestPusher_RefreshBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t)
		var out logbuf.Buffer
		log := out.Logger()
		s := &cutOff{withPush: &withPush{Service: service.New(b)}, queues: true, down: true}
		p := pusher.New(s, pusher.Options{Logger: log, Refresh: 10 * time.Millisecond})
		p.Start()
		time.Sleep(10 * time.Second)
		s.mu.Lock()
		reads := s.calls
		s.down = false
		s.mu.Unlock()
		time.Sleep(6 * time.Second) // the back-off under way, then a read
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		// 0.1, 0.2, 0.4 … 5 s apart (±20 %): about 7 in 10 s.
		if reads < 5 || reads > 9 {
			t.Errorf("%d reads in 10 s of failures, want about 7", reads)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < 2 || len(lines) > reads+1 || !strings.Contains(lines[0], "reading the push queues failed") || !strings.Contains(lines[0], "failures=1") {
			t.Fatalf("log:\n%s\nwant the first failure with its count, then about a line a second", out.String())
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "reading the push queues works again") {
			t.Errorf("last line %q, want the recovery", last)
		}
	})
}

// TestPusher_PushFailuresLogged: ten pushes under way whose touches fail
// for 10 s (ttr 1 s: a touch every 500 ms each) log about once a second
// with a count, not 200 lines; and their ten settles failing at once
// (their leases gone) log one line, not ten.
func TestPusher_PushFailuresLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openBroker(t)
		var out logbuf.Buffer
		release := make(chan struct{})
		l := pipenet.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusNoContent)
		})}
		go srv.Serve(l)
		s := &cutOff{withPush: &withPush{Service: service.New(b), ends: map[string]*task.Push{"q": {URL: "http://receiver.test/hook", Timeout: time.Minute}}}, touches: true}
		var rs []task.PutRequest
		for i := range 10 {
			rs = append(rs, task.PutRequest{ID: fmt.Sprint(i), TTR: time.Second})
		}
		for _, r := range s.PutBatch(context.Background(), "q", rs) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		p := pusher.New(s, pusher.Options{Logger: out.Logger(), Refresh: time.Hour, Concurrency: 20})
		pusher.DialWith(p, l.Dial)
		p.Start()
		time.Sleep(100 * time.Millisecond) // the ten pushes under way
		s.mu.Lock()
		s.down = true
		s.mu.Unlock()
		time.Sleep(10 * time.Second)
		s.mu.Lock()
		touches := s.calls
		s.mu.Unlock()
		close(release)
		time.Sleep(time.Second)
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		var renew, settle int
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			switch {
			case strings.Contains(line, "renewing") && strings.Contains(line, "failed"):
				renew++
			case strings.Contains(line, "settling") && strings.Contains(line, "failed"):
				settle++
			}
		}
		if touches < 150 || renew < 5 || renew > 12 {
			t.Errorf("%d lines for %d failed touches in 10 s, want about 10", renew, touches)
		}
		if settle != 1 {
			t.Errorf("%d lines for 10 settles failing at once, want 1:\n%s", settle, out.String())
		}
	})
}
