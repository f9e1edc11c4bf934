package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// crashShape is how hard TestCrash shakes the server.
type crashShape struct {
	kills                int
	upMin, upMax         time.Duration // the server runs this long between kills
	downMax              time.Duration // and stays down up to this long
	producers, consumers int
}

var (
	// crashFull: five kills over about 20 s.
	crashFull = crashShape{kills: 5, upMin: 1500 * time.Millisecond, upMax: 4 * time.Second, downMax: time.Second, producers: 3, consumers: 3}
	// crashShort, for -short: two kills.
	crashShort = crashShape{kills: 2, upMin: time.Second, upMax: 2 * time.Second, downMax: 500 * time.Millisecond, producers: 2, consumers: 2}
)

const (
	crashQueue = "crash"
	farQueue   = "far"
	// crashMaxDelay bounds the delays of the crash test's puts, so that due
	// times cross restarts.
	crashMaxDelay = 2 * time.Second
	// crashTTR is the lease of its tasks: a delivery lost in a kill comes
	// back this long after it.
	crashTTR = 2 * time.Second
	// crashReserveWait is the long poll of its consumers, and
	// crashReserveMax how many tasks they ask for.
	crashReserveWait = 300 * time.Millisecond
	crashReserveMax  = 10
	// callTimeout bounds one call of a producer or consumer.
	callTimeout = 10 * time.Second
	// retryPause is how long a producer or consumer waits after a call
	// without an answer (the server is down).
	retryPause = 20 * time.Millisecond
	// drainTimeout bounds the drain after the last restart: the longest
	// delay and lease, and ample time for the consumers.
	drainTimeout = 20 * time.Second
)

// TestCrash is the crash test: producers put tasks (single puts and
// batches, ids chosen by the client, delays of 0 to 2 s) and consumers
// reserve and acknowledge them, while the server is killed with SIGKILL at
// random moments and restarted on the same directory. A ledger accounts
// for every answer and checks the promises as they come (see ledger);
// after the last restart the consumers drain the queue until every
// answered put was delivered and acknowledged. A few tasks due far in the
// future are read after each restart: they keep their job id and their
// due time exactly. Every restart must log the store's report of the
// unclean stop. The seed of the random moments is logged; set
// HOURGLASS_E2E_SEED to repeat it.
func TestCrash(t *testing.T) { engines(t, testCrash) }

func testCrash(t *testing.T) {
	t.Parallel()
	shape := crashFull
	if testing.Short() {
		shape = crashShort
	}
	seed := crashSeed()
	t.Logf("seed %d (HOURGLASS_E2E_SEED=%d repeats the kill schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	s := startServer(t)
	c := s.client()
	l := newLedger()
	far := putFar(t, c)

	var readyAt atomic.Int64 // the current run's ready time, or a lower bound of it
	readyAt.Store(s.runs[0].ready.UnixNano())
	var kills atomic.Int64 // counts kills, to tell a reserve that spans one
	stopProducing, stopConsuming, abort := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var producers, consumers sync.WaitGroup
	for p := range shape.producers {
		r := rand.New(rand.NewPCG(seed, uint64(p+1)))
		producers.Go(func() { produce(c, l, p, r, stopProducing, abort) })
	}
	for range shape.consumers {
		consumers.Go(func() { consume(c, l, &readyAt, &kills, stopConsuming, abort) })
	}
	var once sync.Once
	stopAll := func() {
		once.Do(func() {
			close(abort)
			producers.Wait()
			consumers.Wait()
		})
	}
	defer stopAll() // also when the test fails early

	start := time.Now()
	for k := range shape.kills {
		time.Sleep(shape.upMin + time.Duration(rng.Int64N(int64(shape.upMax-shape.upMin))))
		kills.Add(1)
		s.kill()
		down := time.Duration(rng.Int64N(int64(shape.downMax)))
		t.Logf("kill %d at %v, down %v", k+1, time.Since(start).Round(time.Millisecond), down.Round(time.Millisecond))
		time.Sleep(down)
		readyAt.Store(time.Now().UnixNano()) // a lower bound until it is ready
		s.start()
		readyAt.Store(s.proc.ready.UnixNano())
		if !s.logged("not closed cleanly") {
			t.Errorf("restart %d: the log does not report the unclean stop:\n%s", k+1, s.logText())
		}
		checkFar(t, c, far)
	}
	time.Sleep(shape.upMin) // load on the last run too
	close(stopProducing)
	if !waitGroupWithin(&producers, 30*time.Second) {
		t.Fatalf("producers did not finish within 30 s of the last restart")
	}

	// Drain: every answered put must be delivered and acknowledged (or
	// its ack went unanswered and the server no longer has it).
	deadline := time.Now().Add(drainTimeout)
	for {
		missing, n, ask := l.missing(10)
		if n == 0 {
			break
		}
		for _, p := range ask {
			task, err := c.Get(context.Background(), crashQueue, p.id)
			if errors.Is(err, client.ErrNotFound) || err == nil && (task.JobID != p.job || task.State == api.StateFinished) {
				l.goneJob(p.job)
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("%d answered puts not delivered and acknowledged within %v of the end:\n%s", n, drainTimeout, strings.Join(missing, "\n"))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopConsuming)
	if !waitGroupWithin(&consumers, 30*time.Second) {
		t.Fatalf("consumers did not finish")
	}
	stopAll()

	if failures := l.check(); len(failures) > 0 {
		t.Errorf("%d broken promises:\n%s", len(failures), firstLines(failures, 20))
	}
	ctx := context.Background()
	if tasks, err := c.Reserve(ctx, crashQueue, 10, 0); err != nil || len(tasks) != 0 {
		t.Errorf("Reserve after the drain: %+v, %v; want nothing", tasks, err)
	}
	qs, err := c.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == crashQueue && q != (api.Queue{Name: crashQueue}) {
			t.Errorf("after the drain: %+v; want no task left", q)
		}
	}
	checkFar(t, c, far)
	t.Logf("summary: %s", l.summary(shape.kills))
	t.Logf("latest first hand-over: %s", l.readyLatenessFrom)
	s.stop()
}

// produce puts tasks until stop is closed: producer 0 sometimes in
// batches, all with ids of their own. A put without an answer is retried
// with the same ids until one comes (or abort is closed).
func produce(c *client.Client, l *ledger, p int, r *rand.Rand, stop, abort <-chan struct{}) {
	n := 0
	for {
		select {
		case <-stop:
			return
		default:
		}
		size := 1
		batch := p == 0 && r.IntN(2) == 0
		if batch {
			size = 1 + r.IntN(8)
		}
		reqs := make([]api.PutRequest, size)
		for i := range reqs {
			id := fmt.Sprintf("p%d-%d", p, n)
			n++
			payload := fmt.Sprintf(`{"p":%d,"n":%d}`, p, n)
			delay := time.Duration(0)
			if r.IntN(4) > 0 {
				delay = time.Duration(r.Int64N(int64(crashMaxDelay)))
			}
			reqs[i] = api.PutRequest{ID: id, Payload: []byte(payload), Delay: new(api.Duration(delay)), TTR: new(api.Duration(crashTTR))}
			l.asking(id, payload)
		}
		for {
			select {
			case <-abort:
				return
			default:
			}
			sent := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			var err error
			if batch {
				var res []api.BatchResult
				res, err = c.PutBatch(ctx, crashQueue, reqs)
				if err == nil {
					for i, item := range res {
						if item.Task == nil {
							l.fail("batch item %s: %s", reqs[i].ID, item.Error)
							continue
						}
						l.answered(*item.Task, putInBatch, sent)
					}
					if len(res) != len(reqs) {
						l.fail("batch of %d answered %d results", len(reqs), len(res))
					}
				}
			} else {
				var task api.Task
				var created bool
				task, created, err = c.Put(ctx, crashQueue, reqs[0])
				if err == nil {
					how := putExisting
					if created {
						how = putNew
					}
					l.answered(task, how, sent)
				}
			}
			cancel()
			if err == nil {
				break
			}
			if !unanswered(err) {
				l.fail("put of %s: %v", reqs[0].ID, err)
				break
			}
			for _, req := range reqs {
				l.unknownPutOf(req.ID)
			}
			time.Sleep(retryPause)
		}
		time.Sleep(time.Duration(r.IntN(10)) * time.Millisecond)
	}
}

// consume reserves and acknowledges tasks until stop or abort is closed.
func consume(c *client.Client, l *ledger, readyAt, kills *atomic.Int64, stop, abort <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-abort:
			return
		default:
		}
		ready := time.Unix(0, readyAt.Load())
		run := kills.Load()
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		tasks, err := c.Reserve(ctx, crashQueue, crashReserveMax, crashReserveWait)
		got := time.Now()
		cancel()
		if err == nil && len(tasks) < crashReserveMax && kills.Load() == run {
			l.shortAnswer(sent, got, len(tasks))
		}
		if err != nil {
			if unanswered(err) {
				l.unknownReserve()
			} else {
				l.fail("reserve: %v", err)
			}
			time.Sleep(retryPause)
			continue
		}
		for _, task := range tasks {
			l.deliver(task, sent, got, ready)
		}
		// The acks go together, sharing the server's fsyncs, so that the
		// consumers keep up with the producers and most tasks wait for a
		// reserver rather than the other way round.
		var acks sync.WaitGroup
		for _, task := range tasks {
			acks.Go(func() { ack(c, l, task) })
		}
		acks.Wait()
	}
}

// ack acknowledges one delivered task and records the answer.
func ack(c *client.Client, l *ledger, task api.Task) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	err := c.Ack(ctx, crashQueue, task.ID, task.Lease)
	cancel()
	switch {
	case err == nil:
		l.ack(task.JobID, task.Attempts, time.Now())
	case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrNotFound):
		l.ackRefused()
	case unanswered(err):
		l.unknownAck(task.JobID)
	default:
		l.fail("ack of job %d (%s): %v", task.JobID, task.ID, err)
	}
}

// unanswered reports whether err leaves it unknown whether the call took
// effect: no answer at all (refused, reset, cut by a kill), or 503 (the
// server recovering or stopping; it did nothing, but treating it as
// unknown only weakens the checks).
func unanswered(err error) bool {
	var e *client.Error
	return !errors.As(err, &e) || e.Status == 503
}

// putFar puts tasks due hours from now, to be read after each restart.
func putFar(t *testing.T, c *client.Client) []api.Task {
	t.Helper()
	var far []api.Task
	for i := range 4 {
		task, _, err := c.Put(context.Background(), farQueue, api.PutRequest{
			ID:      fmt.Sprint("far-", i),
			Delay:   new(api.Duration(time.Duration(i+1)*time.Hour + time.Duration(i)*time.Nanosecond*123457)),
			Payload: []byte(fmt.Sprintf(`{"far":%d}`, i)),
		})
		if err != nil {
			t.Fatal(err)
		}
		far = append(far, task)
	}
	return far
}

// checkFar checks that the far tasks are as they were put: delayed, same
// job id, due time to the nanosecond.
func checkFar(t *testing.T, c *client.Client, far []api.Task) {
	t.Helper()
	for _, want := range far {
		got, err := c.Get(context.Background(), farQueue, want.ID)
		if err != nil || !sameTask(got, want) {
			t.Errorf("far task after a restart: %+v, %v\nwant %+v", got, err, want)
		}
	}
}

// crashSeed returns $HOURGLASS_E2E_SEED, or a seed from the clock.
func crashSeed() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("HOURGLASS_E2E_SEED"), 10, 64); err == nil {
		return v
	}
	return uint64(time.Now().UnixNano())
}

// waitGroupWithin waits up to d for wg and reports whether it finished.
func waitGroupWithin(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
