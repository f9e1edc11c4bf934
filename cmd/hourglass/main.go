// Command hourglass runs the durable delay-queue server and calls it:
//
//	hourglass serve [--data DIR | --postgres URL [--node NAME]] [--http ADDR] [--beanstalk ADDR] [--token T] ...
//	hourglass put QUEUE [PAYLOAD] [--raw] [--delay D | --at T] [--id ID] [--priority N] [--server URL]
//	hourglass reserve QUEUE [--max N] [--wait D] [--server URL]   (exits 2 when no task came)
//	hourglass ack QUEUE ID LEASE [--server URL]
//	hourglass queues [--server URL]
//	hourglass get|delete|cancel|touch|nack|release|bury|kick|list QUEUE ... [--server URL]
//	hourglass attempts QUEUE ID | history QUEUE [--outcome O] [--after N] [--limit N]
//	hourglass pause QUEUE [--for D] | resume QUEUE | policy QUEUE [--set JSON [--replace] | --delete]
//	hourglass schedule [NAME [--cron LINE --queue Q | --delete]]
//	hourglass version | --version
//
// serve keeps tasks in a Pebble store in --data, or runs as a node of a
// cluster on the PostgreSQL database --postgres (serve_postgres.go), and
// serves the HTTP API of package api on --http, and beanstalkd's protocol
// on --beanstalk (serve_beanstalk.go), either way: it listens at once, answers
// /readyz with 200 once it has recovered every task, and on SIGTERM or
// SIGINT lets in-flight requests finish, commits, and exits 0. The other
// subcommands but version call a running server with package
// client: the one --server or $HOURGLASS_SERVER names (default
// http://127.0.0.1:7070), with the token from --token or
// $HOURGLASS_TOKEN; they print tasks, policies and schedules as lines of
// JSON (`hourglass help` lists their usage lines). put's PAYLOAD must be
// JSON unless --raw sends it as a string; policy --set merges its JSON
// into the queue's policy (policymerge.go), --replace replaces it.
//
// The benchmarks are a command of their own, cmd/hourglass-bench, so that
// this binary links none of their harness; `hourglass bench` only names
// it.
//
// Usage errors exit with status 2, failed runs and calls with 1; reserve
// exits 2 when no task came within --wait, so that a script tells an
// empty queue from a failed call.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// benchMoved is what `hourglass bench` answers, on one line.
const benchMoved = "hourglass: bench is its own command: hourglass-bench, with the same flags (go run ./cmd/hourglass-bench ...)"

// commandsUsage is the usage line of every subcommand.
var commandsUsage = serveUsage + "\n" + putUsage + "\n" + reserveUsage + "\n" + ackUsage + "\n" + queuesUsage + "\n" +
	taskUsages() + tasksUsage + "\n" + versionUsage

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, for tests: it returns the exit status, 2 for
// a usage error and 1 for a failed run.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return commandError(stderr, commandsUsage, errors.New("missing subcommand"))
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "put":
		return runPut(args[1:], stdout, stderr)
	case "reserve":
		return runReserve(args[1:], stdout, stderr)
	case "ack":
		return runAck(args[1:], stdout, stderr)
	case "queues":
		return runQueues(args[1:], stdout, stderr)
	case "tasks":
		return runTasks(args[1:], stdout, stderr)
	case "get", "delete", "cancel", "touch", "nack", "release", "bury", "kick", "list", "attempts", "history", "pause", "resume", "policy", "schedule":
		return runTaskCommand(args[0], args[1:], stdout, stderr)
	case "bench":
		fmt.Fprintln(stderr, benchMoved)
		return 2
	case "version", "--version", "-version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, commandsUsage)
		fmt.Fprintln(stdout, "\nRun hourglass SUBCOMMAND -h for its flags.")
		return 0
	}
	return commandError(stderr, commandsUsage, fmt.Errorf("unknown subcommand %q", args[0]))
}
