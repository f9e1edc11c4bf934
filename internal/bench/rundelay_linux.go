package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runDelay returns how long the threads of process pid have waited,
// runnable, for a core since they started: the sum over
// /proc/PID/task/*/schedstat of its second field (the kernel's
// run_delay). Threads that have exited are not counted, so a process
// whose threads come and go reads low: Go's threads mostly stay.
func runDelay(pid int) (time.Duration, bool) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		return 0, false
	}
	var sum int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited meanwhile
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			return 0, false
		}
		ns, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += ns
	}
	return time.Duration(sum), true
}
