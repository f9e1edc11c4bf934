package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// postgresCPU returns the CPU time, user plus system, that the PostgreSQL
// server of data directory dir has used so far: its postmaster's (whose
// pid is the first line of dir/postmaster.pid), that of the children it
// has waited for (backends that have exited), and that of its children
// still running (backends, the WAL writer, the checkpointer), from
// /proc. It reads every process's stat, O(processes).
func postgresCPU(dir string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("bench: %s/postmaster.pid: %w", dir, err)
	}
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	ticks := f.utime + f.stime + f.cutime + f.cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, err := procStat(child)
		if err != nil || c.ppid != pid {
			continue // gone since ReadDir, or not a child
		}
		ticks += c.utime + c.stime
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// procFields are the fields of /proc/PID/stat that postgresCPU reads, the
// times in ticks of 1/userHZ s.
type procFields struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads fields 4 (ppid) and 14 to 17 (utime, stime, cutime,
// cstime) of /proc/PID/stat.
func procStat(pid int) (procFields, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procFields{}, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procFields{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 15 {
		return procFields{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var n [5]int64
	for k, s := range []string{f[1], f[11], f[12], f[13], f[14]} {
		if n[k], err = strconv.ParseInt(s, 10, 64); err != nil {
			return procFields{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return procFields{ppid: int(n[0]), utime: n[1], stime: n[2], cutime: n[3], cstime: n[4]}, nil
}
