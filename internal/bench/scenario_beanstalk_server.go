package bench

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglass-go/hourglass/internal/loadgen"
)

// The two servers of the beanstalk scenario, the rows' structures.
const (
	beanstalkd         = "beanstalkd"
	beanstalkHourglass = "hourglass"
	// beanstalkDisk is the structure of the fsync row: the disk itself.
	beanstalkDisk = "disk"
)

// beanstalkServer is one server of the beanstalkd protocol on loopback,
// started by a job of the beanstalk scenario on a temporary directory of
// its own: real beanstalkd with its binlog there, or `hourglass serve`
// with its store there. close stops it and removes the directory.
type beanstalkServer struct {
	addr string
	rss  func() (int64, error)
	cpu  func() (time.Duration, error) // the process's CPU time so far
	// commits returns the totals of hourglass's group-commit histogram
	// (task writes, commits); nil for beanstalkd.
	commits func() (tasks, groups float64, err error)
	close   func()
}

// startBeanstalkServer starts the server called name (beanstalkd or
// hourglass; bin is the hourglass binary).
func startBeanstalkServer(name, bin string) (*beanstalkServer, error) {
	dir, err := os.MkdirTemp("", "hourglass-bench-beanstalk-")
	if err != nil {
		return nil, err
	}
	var s *beanstalkServer
	if name == beanstalkd {
		s, err = startBeanstalkd(dir)
	} else {
		s, err = startHourglassBeanstalk(bin, dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	stop := s.close
	s.close = func() {
		stop()
		os.RemoveAll(dir)
	}
	return s, nil
}

// startBeanstalkd starts beanstalkd with its binlog in dir, at its default
// fsync: at most every 50 ms.
func startBeanstalkd(dir string) (*beanstalkServer, error) {
	b, err := loadgen.StartBeanstalkd(dir)
	if err != nil {
		return nil, err
	}
	return &beanstalkServer{
		addr:  b.Addr,
		rss:   func() (int64, error) { return processRSS(b.Pid) },
		cpu:   func() (time.Duration, error) { return processCPU(b.Pid) },
		close: func() { b.Stop() },
	}, nil
}

// startHourglassBeanstalk starts `hourglass serve --data dir/data
// --beanstalk ADDR` on a free loopback port, with the serve scenario's
// process (start, stop, RSS). That process takes no flags beyond the
// serve scenario's, so it runs a shell script in dir that adds
// --beanstalk and execs the binary: the process it starts and stops is
// hourglass itself.
func startHourglassBeanstalk(bin, dir string) (*beanstalkServer, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "hourglass-beanstalk")
	text := fmt.Sprintf("#!/bin/sh\nexec %s \"$@\" --beanstalk %s\n", shellQuote(bin), addr)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		return nil, err
	}
	p := newServeProcess(script, filepath.Join(dir, "data"))
	if _, err := p.start(); err != nil {
		p.kill()
		return nil, err
	}
	pid := p.cmd.Process.Pid
	commits := func() (tasks, groups float64, err error) {
		const sum, count = "hourglass_store_tasks_per_commit_sum", "hourglass_store_tasks_per_commit_count"
		m, err := p.metrics(sum, count)
		return m[sum], m[count], err
	}
	return &beanstalkServer{
		addr:    addr,
		rss:     p.rss,
		cpu:     func() (time.Duration, error) { return processCPU(pid) },
		commits: commits,
		close:   p.stop,
	}, nil
}

// freeLoopbackAddr returns a loopback address whose port was free a
// moment ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
