package cluster

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout is the dialer's Control (pool.go): it sets
// TCP_USER_TIMEOUT on the socket, the most that data sent may stay
// unacknowledged before the kernel drops the connection. Keep-alive
// probes find a dead peer of an idle connection; this finds one of a
// connection that has a write in flight, which keep-alive leaves alone.
func setUserTimeout(network, address string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil // a local socket has no TCP options
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
