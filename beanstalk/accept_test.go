package beanstalk_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/beanstalk"
	"github.com/hourglass-go/hourglass/internal/logbuf"
	"github.com/hourglass-go/hourglass/internal/pipenet"
	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/service"
)

// fullListener is a pipenet.Listener whose Accept fails with EMFILE, as a
// process out of file descriptors does, until until; it records when.
type fullListener struct {
	*pipenet.Listener

	mu    sync.Mutex
	until time.Time   // guarded by mu
	tries []time.Time // guarded by mu
}

func (l *fullListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if now := time.Now(); now.Before(l.until) {
		l.tries = append(l.tries, now)
		l.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestServe_AcceptBacksOff: while Accept fails for want of descriptors
// (20 s), the server retries after internal/retry's back-off (5 ms
// doubling to 1 s, jittered), logs about once a second with a count, and
// once when a connection is accepted again; a Shutdown during a wait
// ends Serve at once.
func TestServe_AcceptBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out logbuf.Buffer
		log := out.Logger()
		b := openMem(t)
		l := &fullListener{Listener: pipenet.Listen()}
		l.until = time.Now().Add(20 * time.Second)
		srv := beanstalk.NewServer(service.New(b), beanstalk.Options{Logger: log})
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()

		a, err := l.Dial(context.Background(), "", "") // accepted once the 20 s are over
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		synctest.Wait()

		l.mu.Lock()
		tries := l.tries
		l.tries = nil
		l.mu.Unlock()
		// 5 ms, 10 ms … 640 ms, then 1 s ± 20 %: about 20 tries.
		if len(tries) < 15 || len(tries) > 30 {
			t.Errorf("%d accepts in 20 s of EMFILE, want about 20", len(tries))
		}
		atCap := map[time.Duration]bool{}
		for i := 1; i < len(tries); i++ {
			want := min(5*time.Millisecond<<(i-1), time.Second)
			d := tries[i].Sub(tries[i-1])
			if d < time.Duration(float64(want)*(1-retry.Jitter)) || d > time.Duration(float64(want)*(1+retry.Jitter)) {
				t.Errorf("wait %d = %v, want %v ± %v%%", i, d, want, retry.Jitter*100)
			}
			if want == time.Second {
				atCap[d] = true
			}
		}
		if len(atCap) < 3 {
			t.Errorf("the waits at the cap took %d values: no jitter", len(atCap))
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		failed := 0
		for _, line := range lines[:len(lines)-1] {
			if strings.Contains(line, "accepting connections failed") && strings.Contains(line, "failures=") {
				failed++
			}
		}
		if failed < 10 || failed > 21 || failed != len(lines)-1 {
			t.Errorf("%d lines of %d for %d failed accepts in 20 s, want about one a second with a count:\n%s", failed, len(lines), len(tries), strings.Join(lines, "\n"))
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, "works again") {
			t.Errorf("last line %q, want the accept working again", last)
		}

		// Out of descriptors again, then a Shutdown in the middle of a
		// second's wait: Serve returns without waiting it out.
		l.mu.Lock()
		l.until = time.Now().Add(time.Hour)
		l.mu.Unlock()
		a, err = l.Dial(context.Background(), "", "") // wakes the Accept waiting; the next ones fail
		if err != nil {
			t.Fatal(err)
		}
		a.Close()
		time.Sleep(10*time.Second + 500*time.Millisecond)
		start := time.Now()
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-served; err != beanstalk.ErrServerClosed {
			t.Errorf("Serve = %v, want ErrServerClosed", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Serve returned %v after Shutdown, want at once", d)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.tries) < 10 {
			t.Errorf("%d accepts in the second spell, want about 15: the test did not wait in a back-off", len(l.tries))
		}
	})
}
