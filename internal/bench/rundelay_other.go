//go:build !linux

package bench

import "time"

// runDelay is known on Linux alone.
func runDelay(pid int) (time.Duration, bool) { return 0, false }
