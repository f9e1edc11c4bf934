package pgtest

import "syscall"

// attr runs a child as the server's user and, on Linux, has the kernel
// send it SIGQUIT (PostgreSQL's immediate shutdown) should the test
// process die without stopping it, so that no server outlives its test.
func (s *Server) attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
}
