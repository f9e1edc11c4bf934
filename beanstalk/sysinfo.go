package beanstalk

import (
	"os"
	"runtime"
)

// sysInfo is what the stats command reports of the host: beanstalkd takes
// it from uname(2).
type sysInfo struct {
	hostname, os, platform string
}

// cpuTimes are the process's CPU times as beanstalkd prints them,
// "seconds.microseconds".
type cpuTimes struct {
	user, system string
}

// fallbackSystem is sysInfo where uname(2) is not available.
func fallbackSystem() sysInfo {
	h, _ := os.Hostname()
	return sysInfo{hostname: h, os: runtime.GOOS, platform: runtime.GOARCH}
}
