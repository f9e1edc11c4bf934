//go:build !linux

package bench

import (
	"errors"
	"os"
	"time"
)

// processCPU is known on Linux only (from /proc).
func processCPU(pid int) (time.Duration, error) {
	return 0, errors.New("bench: a process's CPU time is read from /proc, on Linux only")
}

// syncData flushes f to the disk: fsync, where fdatasync is not offered.
func syncData(f *os.File) error { return f.Sync() }
