package hourglass

// runner hands callbacks to an executor with panics contained: the last
// step of a timeout's path, from a driver's hand-over (driver.go) to the
// callback. It is safe for concurrent use; a driver holds a copy.
type runner struct {
	exec    Executor
	inline  bool // exec is Inline: call callbacks directly
	goes    bool // exec is Goroutines: go without a closure
	onPanic func(v any)
}

func newRunner(c *config) runner {
	return runner{exec: c.exec, inline: c.exec == Inline, goes: c.exec == Goroutines, onPanic: c.panicHandler}
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
		go callWith(r, f, a)
	default:
		r.exec.Execute(func() { callWith(r, f, a) })
	}
}

// callWith runs f(a), passing a panic to r's panic handler.
func callWith[A any](r *runner, f func(A), a A) {
	defer r.contain()
	f(a)
}

// call runs f, passing a panic to the panic handler.
func (r *runner) call(f func()) { callWith(r, invoke, f) }

// contain, deferred, passes a panic to the panic handler.
func (r *runner) contain() {
	if v := recover(); v != nil {
		r.onPanic(v)
	}
}
