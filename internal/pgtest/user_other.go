//go:build !unix

package pgtest

import "syscall"

func unprivileged() (*syscall.Credential, error) { return nil, nil }

func (s *Server) chown(string) error { return nil }

func (s *Server) attr() *syscall.SysProcAttr { return nil }
