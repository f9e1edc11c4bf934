package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The client subcommands on one task, or one queue's tasks, beside put,
// reserve and ack (clientcmds.go): each is a line of taskCommands, with
// its usage, the names of its positional arguments, its own flags and
// what it calls.

// taskCommand is one subcommand of taskCommands (or queueCommands,
// queuecmds.go).
type taskCommand struct {
	usage string
	args  []string // names of the positional arguments, all required
	// optional names positional arguments that may follow args.
	optional []string
	// flags defines the subcommand's own flags on fs; nil: none.
	flags func(fs *flag.FlagSet, v *taskFlags)
	// check refuses flags that do not go together, before any call (a
	// usage error); nil: none.
	check func(a []string, v *taskFlags) error
	// call makes the call and prints its answer.
	call func(ctx context.Context, c *client.Client, a []string, v *taskFlags, stdout io.Writer) error
}

// taskFlags are the values of the subcommands' own flags.
type taskFlags struct {
	delay   time.Duration // client.RetryDelay: nack's --delay not given
	errText string
	state   string
	after   uint64 // history's --after
	cursor  string // list's --after: an opaque cursor
	limit   int
	// history's --outcome
	outcome string
	// pause's --for (0: until resumed)
	pauseFor time.Duration
	// policy's --set, --set-file, --replace and --delete, and the
	// policy they set
	set, setFile    string
	replace, delete bool
	policy          api.Policy
	// schedule's: the line, its options (in sched) and the actions
	cron, queue, payload, timezone string
	sched                          api.ScheduleRequest
	run, pause, resume             bool
	// runs lists a schedule's runs, from runsAfter ("": now).
	runs      bool
	runsAfter string
}

// delayFlag defines --delay, a duration of 0 or more, into v.delay.
func delayFlag(fs *flag.FlagSet, v *taskFlags, usage string) {
	fs.Func("delay", usage, func(s string) error {
		d, err := parseDuration(s)
		if err == nil && d < 0 {
			err = errors.New("want 0s or more")
		}
		v.delay = d.D()
		return err
	})
}

// taskCommands are the subcommands by name.
var taskCommands = map[string]taskCommand{
	"get": {
		usage: "usage: hourglass get QUEUE ID [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, out io.Writer) error {
			t, err := c.Get(ctx, a[0], a[1])
			if err != nil {
				return err
			}
			return writeJSON(out, t)
		},
	},
	"delete": {
		usage: "usage: hourglass delete QUEUE ID [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, _ io.Writer) error {
			return c.Delete(ctx, a[0], a[1])
		},
	},
	"cancel": {
		usage: "usage: hourglass cancel QUEUE ID [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, _ io.Writer) error {
			return c.Cancel(ctx, a[0], a[1])
		},
	},
	"touch": {
		usage: "usage: hourglass touch QUEUE ID LEASE [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID", "LEASE"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, out io.Writer) error {
			t, err := c.Touch(ctx, a[0], a[1], a[2])
			if err != nil {
				return err
			}
			return writeJSON(out, t)
		},
	},
	"nack": {
		usage: "usage: hourglass nack QUEUE ID LEASE [--delay D] [--error TEXT] [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID", "LEASE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			v.delay = client.RetryDelay
			delayFlag(fs, v, "how long the task waits before it is ready again (default: as the queue's retry policy says)")
			fs.StringVar(&v.errText, "error", "", "why the attempt failed, kept as the task's last_error")
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			t, err := c.Nack(ctx, a[0], a[1], a[2], v.delay, v.errText)
			if err != nil {
				return err
			}
			return writeJSON(out, t)
		},
	},
	"release": {
		usage: "usage: hourglass release QUEUE ID LEASE [--delay D] [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID", "LEASE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			delayFlag(fs, v, "how long the task waits before it is ready again; the attempt does not count")
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			t, err := c.Release(ctx, a[0], a[1], a[2], v.delay)
			if err != nil {
				return err
			}
			return writeJSON(out, t)
		},
	},
	"bury": {
		usage: "usage: hourglass bury QUEUE ID LEASE [--error TEXT] [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID", "LEASE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.StringVar(&v.errText, "error", "", "why, kept as the task's last_error")
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			t, err := c.Bury(ctx, a[0], a[1], a[2], v.errText)
			if err != nil {
				return err
			}
			return writeJSON(out, t)
		},
	},
	"kick": {
		usage: "usage: hourglass kick QUEUE ID [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, _ io.Writer) error {
			return c.Kick(ctx, a[0], a[1])
		},
	},
	"list": {
		usage: "usage: hourglass list QUEUE [--state S] [--after C] [--limit N] [--server URL] [--token T]",
		args:  []string{"QUEUE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.StringVar(&v.state, "state", "", "only tasks in this state: delayed, ready, reserved or dead")
			fs.StringVar(&v.cursor, "after", "", "the page after this cursor (the last line's next), in due order")
			fs.IntVar(&v.limit, "limit", api.DefaultListLimit, fmt.Sprintf("most tasks on the page: 1 to %d", api.MaxListLimit))
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			tasks, next, err := c.ListTasks(ctx, a[0], v.state, v.cursor, v.limit)
			if err != nil {
				return err
			}
			for _, t := range tasks {
				if err := writeJSON(out, t); err != nil {
					return err
				}
			}
			return writeJSON(out, struct {
				Next string `json:"next"`
			}{next})
		},
	},
}

// runTaskCommand runs the subcommand name of taskCommands, queueCommands
// or historyCommands.
func runTaskCommand(name string, args []string, stdout, stderr io.Writer) int {
	tc := command(name)
	var (
		o clientOptions
		v taskFlags
	)
	fs := clientFlags(name, &o)
	if tc.flags != nil {
		tc.flags(fs, &v)
	}
	pos, err := parseArgs(fs, args, len(tc.args), len(tc.args)+len(tc.optional), joinArgs(tc.args))
	if err == nil && tc.check != nil {
		err = tc.check(pos, &v)
	}
	var c *client.Client
	if err == nil {
		c, err = o.newClient(fs, os.Getenv)
	}
	if code := usageOr(err, fs, tc.usage, stdout, stderr); code >= 0 {
		return code
	}
	ctx, cancel := clientContext()
	defer cancel()
	if err := tc.call(ctx, c, pos, &v, stdout); err != nil {
		return callError(stderr, err)
	}
	return 0
}

// joinArgs names the positional arguments in a parse error: "A, B or C".
func joinArgs(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + " or " + names[len(names)-1]
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// command returns the subcommand name of taskCommands, queueCommands or
// historyCommands (historycmds.go).
func command(name string) taskCommand {
	if tc, ok := taskCommands[name]; ok {
		return tc
	}
	if tc, ok := queueCommands[name]; ok {
		return tc
	}
	return historyCommands[name]
}

// taskUsages returns the usage lines of taskCommands, queueCommands and
// historyCommands, one a line, in the order of taskCommandNames.
func taskUsages() string {
	var s string
	for _, name := range taskCommandNames {
		s += command(name).usage + "\n"
	}
	return s
}

// taskCommandNames are the names of taskCommands, queueCommands and
// historyCommands, in the order `hourglass help` lists them.
var taskCommandNames = []string{"get", "delete", "cancel", "touch", "nack", "release", "bury", "kick", "list", "attempts", "history", "pause", "resume", "policy", "schedule"}
