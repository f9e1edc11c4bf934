//go:build !linux

package bench

import (
	"errors"
	"time"
)

// postgresCPU is known on Linux only (from /proc).
func postgresCPU(dir string) (time.Duration, error) {
	return 0, errors.New("bench: a process's CPU time is read from /proc, on Linux only")
}
