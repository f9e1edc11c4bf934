//go:build unix && !linux

package pgtest

import "syscall"

// attr runs a child as the server's user.
func (s *Server) attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: s.cred}
}
