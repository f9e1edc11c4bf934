package hourglass_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass"
)

// Every test that starts a Pool runs inside synctest.Test, which fails if a
// worker goroutine is still blocked when the test function returns: a Pool
// whose Close did not wait for its workers leaks, and the leak fails the test.

func TestPool_RunsEveryTaskOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers = 16
			each    = 500
		)
		p := hourglass.NewPool(4, 8)
		var runs [callers * each]atomic.Int32
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for i := range each {
					n := &runs[c*each+i]
					p.Execute(func() { n.Add(1) })
				}
			})
		}
		wg.Wait()
		p.Close()
		for i := range runs {
			if n := runs[i].Load(); n != 1 {
				t.Fatalf("task %d ran %d times, want 1", i, n)
			}
		}
	})
}

func TestPool_CloseConcurrentWithExecute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers = 8
			each    = 200
		)
		p := hourglass.NewPool(2, 4)
		var ran atomic.Int32
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range each {
					p.Execute(func() { ran.Add(1) })
				}
			})
		}
		wg.Go(p.Close)
		wg.Wait()
		p.Close()
		if got := ran.Load(); got != callers*each {
			t.Fatalf("%d tasks ran, want %d", got, callers*each)
		}
	})
}

// TestPool_Goexit checks that a task calling runtime.Goexit, as t.FailNow
// does, does not take its worker away: later tasks still run on a worker,
// not on the caller, and Close still waits for every worker.
func TestPool_Goexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := hourglass.NewPool(1, 4)
		for range 3 {
			p.Execute(runtime.Goexit)
		}
		caller := make(chan struct{})
		var onCaller atomic.Bool
		ran := make(chan struct{})
		p.Execute(func() {
			select {
			case <-caller:
			default:
				onCaller.Store(true)
			}
			close(ran)
		})
		close(caller)
		synctest.Wait()
		select {
		case <-ran:
		default:
			t.Fatal("a task queued after three that called runtime.Goexit never ran")
		}
		if onCaller.Load() {
			t.Error("the task ran on the caller, want a worker")
		}
		p.Close()
	})
}

// blockWorker hands p a task that holds its only worker until release is
// closed, and returns once the worker is blocked in it. It waits for the
// worker to be idle first, so that even with queue 0 the task goes to the
// worker rather than running on the caller.
func blockWorker(t *testing.T, p *hourglass.Pool, release <-chan struct{}) {
	t.Helper()
	synctest.Wait()
	started := make(chan struct{})
	p.Execute(func() {
		close(started)
		<-release
	})
	<-started
	synctest.Wait()
}

func TestPool_CloseRunsQueuedAndWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const queue = 10
		p := hourglass.NewPool(1, queue)
		release := make(chan struct{})
		blockWorker(t, p, release)

		var ran atomic.Int32
		for range queue {
			p.Execute(func() { ran.Add(1) })
		}
		if got := ran.Load(); got != 0 {
			t.Fatalf("%d tasks ran on the caller with room in the queue", got)
		}

		var closed atomic.Bool
		go func() {
			p.Close()
			closed.Store(true)
		}()
		synctest.Wait()
		if closed.Load() {
			t.Fatal("Close returned while a task was still running")
		}

		close(release)
		synctest.Wait()
		if !closed.Load() {
			t.Fatal("Close did not return after the worker finished")
		}
		if got := ran.Load(); got != queue {
			t.Fatalf("Close returned after %d queued tasks ran, want %d", got, queue)
		}
	})
}

func TestPool_FullQueueRunsOnCaller(t *testing.T) {
	for _, queue := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("queue=%d", queue), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := hourglass.NewPool(1, queue)
				defer p.Close()
				release := make(chan struct{})
				defer close(release)
				blockWorker(t, p, release)
				for range queue {
					p.Execute(func() {})
				}

				// Not atomic on purpose: if f ran on another goroutine,
				// the race detector would report it.
				ran := false
				p.Execute(func() { ran = true })
				if !ran {
					t.Fatal("Execute on a full queue returned before f ran")
				}
			})
		})
	}
}

func TestPool_ExecuteAfterCloseRunsOnCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := hourglass.NewPool(2, 4)
		p.Close()
		ran := false // not atomic: see TestPool_FullQueueRunsOnCaller
		p.Execute(func() { ran = true })
		if !ran {
			t.Fatal("Execute after Close returned before f ran")
		}
	})
}

func TestPool_CloseIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := hourglass.NewPool(3, 3)
		release := make(chan struct{})
		p.Execute(func() { <-release })
		var wg sync.WaitGroup
		var returned atomic.Int32
		for range 4 {
			wg.Go(func() {
				p.Close()
				returned.Add(1)
			})
		}
		synctest.Wait()
		if got := returned.Load(); got != 0 {
			t.Fatalf("%d Close calls returned while a task was running", got)
		}
		close(release)
		wg.Wait()
		p.Close()
	})
}

func TestPool_AtMostWorkersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 3
		p := hourglass.NewPool(workers, 100)
		var running, peak atomic.Int32
		for range 50 {
			p.Execute(func() {
				n := running.Add(1)
				for {
					m := peak.Load()
					if n <= m || peak.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(time.Millisecond) // virtual time: holds the worker
				running.Add(-1)
			})
		}
		p.Close()
		if got := peak.Load(); got != workers {
			t.Fatalf("at most %d tasks ran at once, want %d", got, workers)
		}
	})
}

func TestNewPool_BadArgumentsPanic(t *testing.T) {
	for _, tc := range []struct{ workers, queue int }{
		{0, 1},
		{-1, 1},
		{1, -1},
	} {
		t.Run(fmt.Sprintf("workers=%d,queue=%d", tc.workers, tc.queue), func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "hourglass: NewPool: ") {
					t.Fatalf("panic %q, want one starting %q", msg, "hourglass: NewPool: ")
				}
			}()
			hourglass.NewPool(tc.workers, tc.queue)
		})
	}
}

func TestPool_ExecuteNilPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := hourglass.NewPool(1, 1)
		defer p.Close()
		defer func() {
			msg, _ := recover().(string)
			if !strings.HasPrefix(msg, "hourglass: ") {
				t.Fatalf("panic %q, want one starting %q", msg, "hourglass: ")
			}
		}()
		p.Execute(nil)
	})
}

func ExamplePool() {
	p := hourglass.NewPool(4, 16)
	squares := make([]int, 8)
	for i := range squares {
		p.Execute(func() { squares[i] = i * i })
	}
	p.Close() // runs everything queued and waits for the workers
	fmt.Println(squares)

	p.Execute(func() { fmt.Println("after Close, on the caller") })
	// Output:
	// [0 1 4 9 16 25 36 49]
	// after Close, on the caller
}
