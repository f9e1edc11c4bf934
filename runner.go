package hourglass

import "sync/atomic"

// runner hands callbacks to an executor with panics contained: the last
// step of a timeout's path, from a driver's hand-over (driver.go) to the
// callback. It is safe for concurrent use; a driver holds a copy.
type runner struct {
	exec    Executor
	inline  bool // exec is Inline: call callbacks directly
	goes    bool // exec is Goroutines: go without a closure
	onPanic func(v any)
	// waiting counts the callbacks handed to goroutines of their own
	// (Goroutines) that have not started yet: one count for a whole Timer,
	// whose drivers yield to them while there are many (see
	// driver.settle).
	waiting *atomic.Int64
}

// newRunner returns the runner of config c, counting the callbacks it
// starts on goroutines in waiting.
func newRunner(c *config, waiting *atomic.Int64) runner {
	return runner{exec: c.exec, inline: c.exec == Inline, goes: c.exec == Goroutines, onPanic: c.panicHandler, waiting: waiting}
}

// invoke calls f: runWith's f for a plain callback.
func invoke(f func()) { f() }

// runWith hands f(a) to r's executor, wrapped in the panic handler. The
// built-in executors need no closure, so handing over allocates nothing
// for Inline and only the goroutine for Goroutines.
func runWith[A any](r *runner, f func(A), a A) {
	switch {
	case r.inline:
		callWith(r, f, a)
	case r.goes:
		r.waiting.Add(1)
		go startWith(r, f, a)
	default:
		r.exec.Execute(func() { callWith(r, f, a) })
	}
}

// callWith runs f(a), passing a panic to r's panic handler.
func callWith[A any](r *runner, f func(A), a A) {
	defer r.contain()
	f(a)
}

// startWith is callWith on a goroutine of its own, counted in r.waiting
// until it starts. Whoever starts the goroutine counts it first.
func startWith[A any](r *runner, f func(A), a A) {
	r.waiting.Add(-1)
	callWith(r, f, a)
}

// call runs f, passing a panic to the panic handler.
func (r *runner) call(f func()) { callWith(r, invoke, f) }

// contain, deferred, passes a panic to the panic handler.
func (r *runner) contain() {
	if v := recover(); v != nil {
		r.onPanic(v)
	}
}
