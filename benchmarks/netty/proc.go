package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The process counters both sides are measured by, read from Linux's
// /proc in the same way: NettyBench.java's cpuNanos reads the same fields.

// clockTick is the unit of /proc's CPU times, USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// procCPU returns the CPU time, user plus system, that process pid ("self"
// for this one) has used: fields 14 and 15 of /proc/PID/stat, summed over
// its threads by the kernel. Its resolution is a clock tick, so a window
// measured with it must last a second or so.
func procCPU(pid string) (time.Duration, error) {
	return statCPU(filepath.Join("/proc", pid, "stat"))
}

// threadCPU returns the CPU time, user plus system, that the calling
// thread has used (/proc/thread-self/stat), in clock ticks as procCPU.
func threadCPU() (time.Duration, error) { return statCPU("/proc/thread-self/stat") }

// statCPU reads fields 14 and 15 of a /proc stat file.
func statCPU(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("%s: no command field", path)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields", path, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", path, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// procSwitches returns the context switches, voluntary and involuntary,
// of every thread process pid has now (/proc/PID/task/*/status): each is
// a thread going off its CPU, for a sleep or preempted, so over a window
// with nothing to do their count is the process's wake-ups. A thread that
// exits within the window takes its count with it.
func procSwitches(pid string) (int64, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", pid, "task", "*", "status"))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("process %s: no threads", pid)
	}
	var total int64
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread exited
		}
		for line := range strings.Lines(string(b)) {
			name, v, ok := strings.Cut(line, ":")
			if !ok || (name != "voluntary_ctxt_switches" && name != "nonvoluntary_ctxt_switches") {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %v", path, err)
			}
			total += n
		}
	}
	return total, nil
}
