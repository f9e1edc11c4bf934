//go:build race

package e2e_test

// raceEnabled is set when the tests run with -race: the server is then
// built with -race too, and a data race in it fails the test that ran it.
const raceEnabled = true
