package hourglass

import (
	"fmt"
	"sync"
)

// Pool is a bounded worker pool: Execute hands f to one of a fixed number of
// worker goroutines through a bounded queue. It is an [Executor] for
// callbacks that should run off the timer's driver goroutine without a
// goroutine each, as [Goroutines] would start.
//
// Execute never blocks and never drops work. When the queue is full, or the
// pool is closed, f runs on the goroutine that called Execute, like Java's
// ThreadPoolExecutor.CallerRunsPolicy. A timer's driver must never block
// behind its own callbacks, or every deadline would slip while it waited; and
// dropping a callback would lose a firing silently. Running on the caller
// instead slows the driver by one callback, which is the backpressure a full
// queue asks for.
//
// A Pool does not recover panics: a panic in f crashes the program, as a
// panic in any goroutine does, or unwinds the caller if f ran there. The
// [Timer] wraps each callback with its own panic handler before handing it
// to its Executor. A callback that calls runtime.Goexit, as t.FailNow
// does, ends only itself: a new worker takes its worker's place.
//
// A Pool must be created with [NewPool]; the zero Pool is not usable. A Pool
// is safe for simultaneous use by multiple goroutines.
type Pool struct {
	// mu guards closed and every send on tasks. Execute sends while holding
	// mu for reading and Close closes tasks while holding it for writing, so
	// no send can race the close and panic.
	mu     sync.RWMutex
	closed bool
	tasks  chan func()

	// workers counts the running worker goroutines, for Close to wait on.
	workers sync.WaitGroup
}

// NewPool returns a Pool with workers worker goroutines, already started,
// and room for queue callbacks waiting for a free worker. With queue 0,
// Execute hands f to a worker only if one is idle at that moment and runs it
// on the caller otherwise.
//
// NewPool panics if workers < 1 or queue < 0: those are programming errors,
// not conditions to handle at run time.
func NewPool(workers, queue int) *Pool {
	if workers < 1 {
		panic(fmt.Sprintf("hourglass: NewPool: workers must be at least 1, got %d", workers))
	}
	if queue < 0 {
		panic(fmt.Sprintf("hourglass: NewPool: queue must not be negative, got %d", queue))
	}
	p := &Pool{tasks: make(chan func(), queue)}
	for range workers {
		p.workers.Go(p.work)
	}
	return p
}

// work runs queued callbacks until Close closes the queue and it is empty.
// A callback that calls runtime.Goexit (as t.FailNow does) ends the worker's
// goroutine; work then starts a new worker in its place, so the pool keeps
// its size and queued callbacks still run. (A panic unwinds through here
// too and starts one, before it ends the program.)
func (p *Pool) work() {
	clean := false
	defer func() {
		if !clean {
			// Safe against Close's Wait: this worker is still counted.
			p.workers.Go(p.work)
		}
	}()
	for f := range p.tasks {
		f()
	}
	clean = true
}

// Execute runs f on a worker, or on the calling goroutine before Execute
// returns if the queue is full or the pool is closed. It never blocks waiting
// for room: its cost is O(1) plus, when the queue is full, f itself.
// Execute panics if f is nil.
//
// Execute is safe to call concurrently with itself and with [Pool.Close],
// including from callbacks running on the pool.
func (p *Pool) Execute(f func()) {
	if f == nil {
		panic("hourglass: Pool.Execute: nil func")
	}
	p.mu.RLock()
	if !p.closed {
		select {
		case p.tasks <- f:
			p.mu.RUnlock()
			return
		default:
		}
	}
	p.mu.RUnlock()
	f()
}

// Close stops the pool accepting work, lets the workers run every callback
// already queued, and returns once they have all exited. From then on
// Execute runs f on its caller. Close is idempotent: every call, including
// concurrent ones, returns only after the workers have exited.
//
// Close must not be called from a callback running on the pool's own
// workers: it would wait for that callback to return, forever.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.tasks)
	}
	p.mu.Unlock()
	p.workers.Wait()
}
