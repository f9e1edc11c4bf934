package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The client subcommands call a running server over the HTTP API with
// package client. Flags may come before, between or after the arguments.
const (
	putUsage     = "usage: hourglass put QUEUE [PAYLOAD|-] [--raw] [--delay D | --at T] [--id ID] [--key K] [--priority N] [--ttr D] [--max-attempts N] [--replace] [--server URL] [--token T]"
	reserveUsage = "usage: hourglass reserve QUEUE [--max N] [--wait D] [--server URL] [--token T] (exits 2 when no task came)"
	ackUsage     = "usage: hourglass ack QUEUE ID LEASE [--server URL] [--token T]"
	queuesUsage  = "usage: hourglass queues [--server URL] [--token T]"
)

// serverEnv names the environment variable that gives the server's URL
// when --server is not given (the flag wins over it), as tokenEnv gives
// the token.
const serverEnv = "HOURGLASS_SERVER"

// defaultServer is the server's URL when neither --server nor
// $HOURGLASS_SERVER gives one: `hourglass serve`'s default --http.
const defaultServer = "http://127.0.0.1:7070"

// stdin is what `hourglass put QUEUE -` reads the payload from.
var stdin io.Reader = os.Stdin

// clientOptions are the flags every client subcommand takes.
type clientOptions struct {
	server string
	token  string
}

// clientFlags returns a FlagSet for the subcommand name with the common
// flags, storing into o.
func clientFlags(name string, o *clientOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("hourglass "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.server, "server", "", "URL of the hourglass server (default $"+serverEnv+", else "+defaultServer+")")
	fs.StringVar(&o.token, "token", "", "bearer token (default $"+tokenEnv+")")
	return fs
}

// parseArgs parses args with fs, allowing flags after the positional
// arguments (everything after "--" is positional), and checks that there
// are from min to max positional arguments, named by what in errors.
func parseArgs(fs *flag.FlagSet, args []string, min, max int, what string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < min:
		return nil, fmt.Errorf("missing %s", what)
	case len(pos) > max:
		return nil, fmt.Errorf("unexpected argument %q", pos[max])
	}
	return pos, nil
}

// newClient returns a client for the common options, with the server's
// URL and the token from the environment when --server and --token were
// not given (an empty $HOURGLASS_SERVER is the default URL).
func (o clientOptions) newClient(fs *flag.FlagSet, getenv func(string) string) (*client.Client, error) {
	if !flagSet(fs, "server") {
		if o.server = getenv(serverEnv); o.server == "" {
			o.server = defaultServer
		}
	}
	if !flagSet(fs, "token") {
		o.token = getenv(tokenEnv)
	}
	return client.New(o.server, client.Options{Token: o.token})
}

// putCommand is a parsed `hourglass put`.
type putCommand struct {
	queue string
	req   api.PutRequest
}

// parsePut parses the arguments of `hourglass put`. PAYLOAD is JSON,
// "-" reads it from standard input; text that is not JSON is refused
// with a hint, unless --raw sends it as a JSON string.
func parsePut(args []string, getenv func(string) string) (putCommand, *client.Client, *flag.FlagSet, error) {
	var (
		o   clientOptions
		p   putCommand
		err error
	)
	fs := clientFlags("put", &o)
	fs.Func("delay", "make the task due after this duration, like 90s or 1h30m", func(s string) error {
		d, err := parseDuration(s)
		p.req.Delay = &d
		return err
	})
	fs.Func("at", "make the task due at this RFC 3339 time, like 2030-01-02T15:04:05Z", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return errors.New("want an RFC 3339 time like 2030-01-02T15:04:05Z")
		}
		p.req.At = &t
		return nil
	})
	fs.StringVar(&p.req.ID, "id", "", "task id; putting an existing id answers that task unchanged")
	fs.StringVar(&p.req.Key, "key", "", "the task's key (a tenant, say): reserves take the ready tasks of a queue's keys in turn")
	fs.Func("priority", "priority, lower first: 0 to 4294967295 (default 1024)", func(s string) error {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return errors.New("want a whole number from 0 to 4294967295")
		}
		p.req.Priority = new(uint32(n))
		return nil
	})
	fs.Func("ttr", "lease of a reservation (default the server's)", func(s string) error {
		d, err := parseDuration(s)
		p.req.TTR = &d
		return err
	})
	fs.IntVar(&p.req.MaxAttempts, "max-attempts", 0, "reservations without an ack before the task is dead; 0: the queue's (default 25), -1: unlimited")
	fs.BoolVar(&p.req.Replace, "replace", false, "replace a task of the same id")
	raw := fs.Bool("raw", false, "send PAYLOAD (or standard input) as a JSON string, whatever it holds")
	pos, err := parseArgs(fs, args, 1, 2, "QUEUE")
	if err != nil {
		return p, nil, fs, err
	}
	if p.req.Delay != nil && p.req.At != nil {
		return p, nil, fs, errors.New("give --delay or --at, not both")
	}
	if p.req.MaxAttempts < api.UnlimitedAttempts {
		return p, nil, fs, fmt.Errorf("invalid value %d for flag --max-attempts: want 0 or more, or -1 (unlimited)", p.req.MaxAttempts)
	}
	p.queue = pos[0]
	if len(pos) == 2 {
		if p.req.Payload, err = putPayload(pos[1], *raw); err != nil {
			return p, nil, fs, err
		}
	}
	c, err := o.newClient(fs, getenv)
	return p, c, fs, err
}

// putPayload turns put's PAYLOAD argument into the payload: JSON as it
// is, refused when it is not JSON (a usage error naming --raw); with raw,
// the text as a JSON string. "-" reads the text from standard input.
func putPayload(s string, raw bool) (json.RawMessage, error) {
	b, what := []byte(s), "PAYLOAD"
	if s == "-" {
		var err error
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("reading the payload: %w", err)
		}
		what = "the payload on standard input"
	}
	if raw {
		return json.Marshal(string(b))
	}
	var v json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s is not JSON (%s): give --raw to send it as a JSON string", what, strings.TrimPrefix(err.Error(), "json: "))
	}
	return b, nil
}

// payloadArg turns schedule's --payload into JSON: JSON as it is, other
// text as a JSON string, "-" standard input (by the same rule).
func payloadArg(s string) (json.RawMessage, error) {
	b := []byte(s)
	if s == "-" {
		var err error
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("reading the payload: %w", err)
		}
	}
	if json.Valid(b) {
		return b, nil
	}
	return json.Marshal(string(b))
}

// parseDuration parses a Go duration for a flag, with the error the
// flags' users need.
func parseDuration(s string) (api.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration like 90s, 1.5m or 2h")
	}
	return api.Duration(d), nil
}

// reserveCommand is a parsed `hourglass reserve`.
type reserveCommand struct {
	queue string
	max   int
	wait  time.Duration
}

// parseReserve parses the arguments of `hourglass reserve`.
func parseReserve(args []string, getenv func(string) string) (reserveCommand, *client.Client, *flag.FlagSet, error) {
	var (
		o clientOptions
		r reserveCommand
	)
	fs := clientFlags("reserve", &o)
	fs.IntVar(&r.max, "max", 1, "most tasks to take: 1 to 1000")
	fs.DurationVar(&r.wait, "wait", 0, "how long to wait for a first task: 0 to 5m")
	pos, err := parseArgs(fs, args, 1, 1, "QUEUE")
	if err != nil {
		return r, nil, fs, err
	}
	if r.max < 1 || r.max > api.MaxReserve {
		return r, nil, fs, fmt.Errorf("invalid value %d for flag --max: want 1 to %d", r.max, api.MaxReserve)
	}
	if r.wait < 0 || r.wait > api.MaxWait {
		return r, nil, fs, fmt.Errorf("invalid value %s for flag --wait: want 0s to %s", r.wait, api.MaxWait)
	}
	r.queue = pos[0]
	c, err := o.newClient(fs, getenv)
	return r, c, fs, err
}

// ackCommand is a parsed `hourglass ack`.
type ackCommand struct{ queue, id, lease string }

// parseAck parses the arguments of `hourglass ack`.
func parseAck(args []string, getenv func(string) string) (ackCommand, *client.Client, *flag.FlagSet, error) {
	var o clientOptions
	fs := clientFlags("ack", &o)
	pos, err := parseArgs(fs, args, 3, 3, "QUEUE, ID or LEASE")
	if err != nil {
		return ackCommand{}, nil, fs, err
	}
	c, err := o.newClient(fs, getenv)
	return ackCommand{pos[0], pos[1], pos[2]}, c, fs, err
}

// parseQueues parses the arguments of `hourglass queues`.
func parseQueues(args []string, getenv func(string) string) (*client.Client, *flag.FlagSet, error) {
	var o clientOptions
	fs := clientFlags("queues", &o)
	if _, err := parseArgs(fs, args, 0, 0, ""); err != nil {
		return nil, fs, err
	}
	c, err := o.newClient(fs, getenv)
	return c, fs, err
}

// usageOr handles a parse error of a client subcommand: for -h it prints
// the usage line and the flags on stdout and returns 0, for another error
// it reports it with the usage line on stderr and returns 2. It returns
// -1 for no error.
func usageOr(err error, fs *flag.FlagSet, usage string, stdout, stderr io.Writer) int {
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stdout, usage)
		fmt.Fprintln(stdout)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	}
	return commandError(stderr, usage, err)
}

// clientContext returns the context of one client call: cancelled by
// SIGINT or SIGTERM.
func clientContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// runPut puts one task and prints it as a line of JSON.
func runPut(args []string, stdout, stderr io.Writer) int {
	p, c, fs, err := parsePut(args, os.Getenv)
	if code := usageOr(err, fs, putUsage, stdout, stderr); code >= 0 {
		return code
	}
	ctx, cancel := clientContext()
	defer cancel()
	t, _, err := c.Put(ctx, p.queue, p.req)
	if err != nil {
		return callError(stderr, err)
	}
	return printJSON(stdout, stderr, t)
}

// exitNoTask is the exit status of a reserve that took no task: a script
// tells an empty queue from a failed call (1).
const exitNoTask = 2

// runReserve reserves tasks and prints each, with its lease, as a line of
// JSON; when none came it prints nothing on stdout, says so on stderr
// and returns exitNoTask.
func runReserve(args []string, stdout, stderr io.Writer) int {
	r, c, fs, err := parseReserve(args, os.Getenv)
	if code := usageOr(err, fs, reserveUsage, stdout, stderr); code >= 0 {
		return code
	}
	ctx, cancel := clientContext()
	defer cancel()
	tasks, err := c.Reserve(ctx, r.queue, r.max, r.wait)
	if err != nil {
		return callError(stderr, err)
	}
	if len(tasks) == 0 {
		fmt.Fprintf(stderr, "hourglass: no task of %s was ready within %s\n", r.queue, r.wait)
		return exitNoTask
	}
	for _, t := range tasks {
		if code := printJSON(stdout, stderr, t); code != 0 {
			return code
		}
	}
	return 0
}

// runAck acknowledges one task; it prints nothing.
func runAck(args []string, stdout, stderr io.Writer) int {
	a, c, fs, err := parseAck(args, os.Getenv)
	if code := usageOr(err, fs, ackUsage, stdout, stderr); code >= 0 {
		return code
	}
	ctx, cancel := clientContext()
	defer cancel()
	if err := c.Ack(ctx, a.queue, a.id, a.lease); err != nil {
		return callError(stderr, err)
	}
	return 0
}

// runQueues prints a table of the queues, their counts by state and
// their pauses ("-": none; "until resumed"; or the time it ends, UTC).
func runQueues(args []string, stdout, stderr io.Writer) int {
	c, fs, err := parseQueues(args, os.Getenv)
	if code := usageOr(err, fs, queuesUsage, stdout, stderr); code >= 0 {
		return code
	}
	ctx, cancel := clientContext()
	defer cancel()
	qs, err := c.Queues(ctx)
	if err != nil {
		return callError(stderr, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tDELAYED\tREADY\tRESERVED\tDEAD\tPAUSED")
	for _, q := range qs {
		paused := "-"
		switch {
		case q.Paused && q.PausedUntil == nil:
			paused = "until resumed"
		case q.Paused:
			paused = q.PausedUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", q.Name, q.Delayed, q.Ready, q.Reserved, q.Dead, paused)
	}
	if err := tw.Flush(); err != nil {
		return callError(stderr, err)
	}
	return 0
}

// printJSON writes v as one line of JSON.
func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return callError(stderr, err)
	}
	return 0
}

// callError reports a failed call on stderr and returns 1.
func callError(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, errorLine(err))
	return 1
}

// commandError reports a usage error of a subcommand and its usage line
// on stderr and returns 2.
func commandError(stderr io.Writer, usage string, err error) int {
	fmt.Fprintf(stderr, "%s\n%s\n", errorLine(err), usage)
	return 2
}

// errorLine returns err's message with one "hourglass: " prefix: errors
// of package client carry it already, the flags' do not.
func errorLine(err error) string {
	msg := err.Error()
	if !strings.HasPrefix(msg, "hourglass: ") {
		msg = "hourglass: " + msg
	}
	return msg
}
