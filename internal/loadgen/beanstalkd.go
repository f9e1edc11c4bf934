package loadgen

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"
)

// ErrNoBeanstalkd is returned (wrapped) by [StartBeanstalkd] when the
// beanstalkd program is not installed.
var ErrNoBeanstalkd = errors.New("hourglass: beanstalkd is not on PATH (Debian package beanstalkd)")

// Beanstalkd is a beanstalkd process started by [StartBeanstalkd].
type Beanstalkd struct {
	Addr string // host:port on loopback
	Pid  int
	cmd  *exec.Cmd
}

// StartBeanstalkd runs beanstalkd on a free loopback port with its binlog
// in binlogDir at its default fsync (at most every 50 ms), and waits until
// it accepts connections. Stop it with [Beanstalkd.Stop].
func StartBeanstalkd(binlogDir string) (*Beanstalkd, error) {
	bin, err := exec.LookPath("beanstalkd")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBeanstalkd, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-b", binlogDir)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &Beanstalkd{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Pid: cmd.Process.Pid, cmd: cmd}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		nc, err := net.Dial("tcp", b.Addr)
		if err == nil {
			nc.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("hourglass: beanstalkd did not listen on %s: %w", b.Addr, err)
		}
	}
}

// Stop kills the process and waits for it.
func (b *Beanstalkd) Stop() error {
	b.cmd.Process.Kill()
	b.cmd.Wait()
	return nil
}
