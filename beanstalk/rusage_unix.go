//go:build unix

package beanstalk

import (
	"fmt"
	"syscall"
)

// usage returns the process's user and system CPU time.
func usage() cpuTimes {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuTimes{"0.000000", "0.000000"}
	}
	return cpuTimes{
		user:   fmt.Sprintf("%d.%06d", int64(ru.Utime.Sec), int64(ru.Utime.Usec)),
		system: fmt.Sprintf("%d.%06d", int64(ru.Stime.Sec), int64(ru.Stime.Usec)),
	}
}
