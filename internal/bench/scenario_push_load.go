package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// The push scenario's receiver and load: an HTTP server on loopback that
// records when each push arrives against its Hourglass-Due, far tasks to
// fill a push queue with, and a stream of tasks falling due.

// pushReceiver is the endpoint of the push scenario's queues: a net/http
// server on 127.0.0.1 that answers every POST 204 at once, keeping
// connections alive, and records each push: its lateness (the handler's
// start minus Hourglass-Due) and its task id. Its methods are safe for
// concurrent use.
type pushReceiver struct {
	url string
	srv *http.Server
	ln  net.Listener

	// mu guards late, seen and want.
	mu   sync.Mutex
	late []time.Duration
	seen map[string]bool // task ids received
	want int             // distinct tasks awaited; done closes at want
	// early counts pushes received before their due time.
	early atomic.Int64
	done  chan struct{}
}

// startPushReceiver starts a receiver on a port the system picks.
func startPushReceiver() (*pushReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &pushReceiver{ln: ln, url: "http://" + ln.Addr().String() + "/push", seen: map[string]bool{}, done: make(chan struct{})}
	rc.srv = &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 10 * time.Second}
	go rc.srv.Serve(ln)
	return rc, nil
}

// serve records one push and answers 204.
func (rc *pushReceiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	due, err := time.Parse(time.RFC3339Nano, r.Header.Get(api.PushDueHeader))
	io.Copy(io.Discard, r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	late := at.Sub(due)
	if late < 0 {
		rc.early.Add(1)
	}
	id := r.Header.Get(api.PushTaskIDHeader)
	rc.mu.Lock()
	rc.late = append(rc.late, late)
	if !rc.seen[id] {
		rc.seen[id] = true
		if len(rc.seen) == rc.want {
			close(rc.done)
		}
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// expect forgets what was received and awaits n distinct tasks.
func (rc *pushReceiver) expect(n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.late, rc.seen, rc.want = nil, map[string]bool{}, n
	rc.early.Store(0)
	rc.done = make(chan struct{})
}

// wait waits until the tasks awaited have all come, or until deadline.
func (rc *pushReceiver) wait(deadline time.Time) {
	rc.mu.Lock()
	done := rc.done
	rc.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// received is what a receiver recorded.
type received struct {
	late     []time.Duration // sorted, one per push
	early    int             // pushes before their due time
	distinct int             // tasks received at least once
}

// result returns what the receiver has recorded so far.
func (rc *pushReceiver) result() received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := received{late: slices.Clone(rc.late), early: int(rc.early.Load()), distinct: len(rc.seen)}
	slices.Sort(out.late)
	return out
}

// close stops the receiver and closes its connections.
func (rc *pushReceiver) close() { rc.srv.Close() }

// pushFill puts n tasks due in an hour (serveFarDelay) into queue, in
// batches of serveBatch from serveFillers clients.
func pushFill(p *serveProcess, queue string, n int) error {
	if _, err := p.fillQueue(queue, n, serveBodyset(), serveFillers, fillTimeout(n)); err != nil {
		return fmt.Errorf("bench: push: filling %d far tasks: %w", n, err)
	}
	return nil
}

// pushStream puts total tasks into queue falling due evenly over d, by
// batches of serveStreamBatch, each batch put serveLead before its first
// due time by a goroutine of its own (a slow put does not hold back the
// next). It returns how many tasks were not put (a put refused or not
// answered in time), and an error only for a refused put while the
// stream ran.
func pushStream(p *serveProcess, queue string, total int, d time.Duration) (lost int, err error) {
	ctx, cancel := pushStreamContext(d)
	defer cancel()
	var (
		firstErr error
		errOnce  sync.Once
		lostN    atomic.Int64
		puts     sync.WaitGroup
	)
	span := time.Duration(float64(serveStreamBatch) / float64(total) * float64(d))
	start := time.Now().Add(serveLead)
	rng := rand.New(rand.NewPCG(7, 8))
	for from := 0; from < total && ctx.Err() == nil; from += serveStreamBatch {
		k := min(serveStreamBatch, total-from)
		batchStart := start.Add(time.Duration(from/serveStreamBatch) * span)
		sleep(ctx, time.Until(batchStart.Add(-serveLead)))
		body := dueBatchJSON(rng, batchStart, span, k)
		puts.Go(func() {
			if err := p.putBatch(ctx, queue, body); err != nil {
				if ctx.Err() == nil {
					errOnce.Do(func() { firstErr = err; cancel() })
				}
				lostN.Add(int64(k))
			}
		})
	}
	puts.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("bench: push: stream put: %w", firstErr)
	}
	return int(lostN.Load()), nil
}
