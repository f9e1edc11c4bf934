//go:build !race

package cluster_test

// raceBuild reports whether the tests run under the race detector.
const raceBuild = false
