// Package e2e holds the black-box tests of `hourglass serve`: they build
// the command once per run, start it as a separate process on a free
// loopback port and a temporary --data directory, and drive it over HTTP
// as clients outside this repository do, with package client and, where
// the wire itself is under test, with raw net/http.
//
// The package has no code of its own; everything is in its tests:
//
//   - main_test.go builds the binary (with -race when the tests run with
//     -race) and fails the run if a test leaves a goroutine behind;
//     harness_test.go starts, stops (SIGTERM, exit 0 within 15 s) and
//     kills (SIGKILL) servers, keeping their logs (log/slog, JSON;
//     logbuffer_test.go) for failure messages and for the tests that read
//     them.
//   - api_test.go walks through every call of the API; badinput_test.go
//     sends every kind of bad input and checks that it changes nothing;
//     semantics_test.go checks long polls, leases, nack, dead and kick,
//     priority order and batches; schedule_test.go the cron schedules;
//     service_test.go the token, the probes, metrics, SIGTERM and the CLI;
//     restart_test.go due times and leases across a kill, and what a
//     recovering server answers.
//   - crash_test.go is the heart: producers and consumers run against a
//     server that is killed with SIGKILL at random moments and restarted
//     on the same directory, and every answer is accounted for
//     (ledger_test.go): every answered put is delivered, no acknowledged
//     task comes back, no task is handed out before it is due, and no
//     reserve comes back empty while a due task waits.
//   - corrupt_test.go damages the newest Pebble write-ahead log of a killed
//     server and checks that the restart reports it as package pebblestore
//     promises, and never serves a damaged record.
//
// Run them with
//
//	go test -race -count=1 ./e2e/...
//
// -short shrinks the crash test (two kills instead of five), and
// HOURGLASS_E2E_SEED repeats a crash test's kill schedule. Four tests run
// at once unless -parallel says otherwise.
package e2e
