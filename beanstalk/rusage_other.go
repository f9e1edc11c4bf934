//go:build !unix

package beanstalk

// usage returns zeros: the platform has no getrusage(2).
func usage() cpuTimes { return cpuTimes{"0.000000", "0.000000"} }
