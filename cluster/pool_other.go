//go:build !linux

package cluster

import "syscall"

// setUserTimeout is the dialer's Control (pool.go): TCP_USER_TIMEOUT is
// Linux's, so elsewhere only the keep-alive probes bound a dead peer.
func setUserTimeout(network, address string, c syscall.RawConn) error { return nil }
