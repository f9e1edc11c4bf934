package hourglass

import (
	"sync"
	"time"
)

// defaultTimer is made on first use: one Timer per process, as one
// HashedWheelTimer per JVM is Netty's advice.
var defaultTimer = sync.OnceValue(func() *Timer { return New() })

// Default returns the shared Timer behind the package-level functions: a
// hierarchical wheel with a 1 ms tick whose callbacks run on goroutines of
// their own. It is made on first use. Stopping it stops the package-level
// functions for the rest of the process, so leave that to main. There is no
// package-level Schedule function, as the name is the [Schedule] type's:
// call Default().Schedule.
func Default() *Timer { return defaultTimer() }

// AfterFunc calls [Timer.AfterFunc] on the [Default] Timer.
func AfterFunc(d time.Duration, f func()) (*Timeout, error) { return Default().AfterFunc(d, f) }

// AtFunc calls [Timer.AtFunc] on the [Default] Timer.
func AtFunc(when time.Time, f func()) (*Timeout, error) { return Default().AtFunc(when, f) }

// ScheduleAtFixedRate calls [Timer.ScheduleAtFixedRate] on the [Default]
// Timer.
func ScheduleAtFixedRate(initialDelay, period time.Duration, f func()) (*Timeout, error) {
	return Default().ScheduleAtFixedRate(initialDelay, period, f)
}

// ScheduleWithFixedDelay calls [Timer.ScheduleWithFixedDelay] on the
// [Default] Timer.
func ScheduleWithFixedDelay(initialDelay, delay time.Duration, f func()) (*Timeout, error) {
	return Default().ScheduleWithFixedDelay(initialDelay, delay, f)
}
