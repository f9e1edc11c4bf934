//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time, user plus system, that the process has
// used so far, and false if the platform cannot tell.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
