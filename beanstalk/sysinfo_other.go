//go:build !linux

package beanstalk

// system returns the host's name, OS and architecture.
func system() sysInfo { return fallbackSystem() }
