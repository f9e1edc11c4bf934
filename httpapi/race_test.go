//go:build race

package httpapi

// raceBuild reports whether the tests run under the race detector.
const raceBuild = true
