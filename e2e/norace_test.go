//go:build !race

package e2e_test

// raceEnabled is set when the tests run with -race (see race_test.go).
const raceEnabled = false
