package clusterbench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"
)

// serverCPU reads the CPU time of the bench's PostgreSQL server: its
// postmaster and every process the postmaster started (backends,
// checkpointer, WAL writer, autovacuum), from /proc. The postmaster is
// found once, as the parent of the server's checkpointer; its children
// are listed again at each refresh. A backend that exited between two
// readings takes its CPU time with it, so the figure is a floor. Zero
// where /proc cannot be read. Not safe for concurrent use.
type serverCPU struct {
	postmaster int
	children   []int
}

// find sets the postmaster, asking the server through c's admin pool;
// false when it cannot be found.
func (s *serverCPU) find(c *Cluster) bool {
	if s.postmaster != 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pid int
	if c.admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`).Scan(&pid) != nil {
		return false
	}
	st, ok := procStat(pid)
	if !ok {
		return false
	}
	s.postmaster = st.ppid
	return s.postmaster > 1
}

// refresh lists the postmaster's children again. O(processes).
func (s *serverCPU) refresh() {
	s.children = s.children[:0]
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.ppid == s.postmaster {
			s.children = append(s.children, pid)
		}
	}
}

// read returns the CPU time of the postmaster and its children as last
// listed.
func (s *serverCPU) read() time.Duration {
	var sum time.Duration
	for _, pid := range append([]int{s.postmaster}, s.children...) {
		if st, ok := procStat(pid); ok {
			sum += st.cpu
		}
	}
	return sum
}

type procInfo struct {
	ppid int
	cpu  time.Duration
}

// procStat reads a process's parent and CPU time (user and system) from
// /proc/PID/stat.
func procStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// The command, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return procInfo{ppid: ppid, cpu: time.Duration(ut+st) * time.Second / 100}, true // USER_HZ
}
