package main

import (
	"context"
	"encoding/json"
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

// taskCommand is one subcommand of taskCommands.
type taskCommand struct {
	usage string
	args  []string // names of the positional arguments, all required
	// flags defines the subcommand's own flags on fs; nil: none.
	flags func(fs *flag.FlagSet, v *taskFlags)
	// call makes the call and prints its answer.
	call func(ctx context.Context, c *client.Client, a []string, v *taskFlags, stdout io.Writer) error
}

// taskFlags are the values of the subcommands' own flags.
type taskFlags struct {
	delay time.Duration
	state string
	after uint64
	limit int
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
		usage: "usage: hourglass nack QUEUE ID LEASE [--delay D] [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID", "LEASE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.DurationVar(&v.delay, "delay", 0, "how long the task waits before it is ready again")
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			t, err := c.Nack(ctx, a[0], a[1], a[2], v.delay, "")
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
		usage: "usage: hourglass list QUEUE [--state S] [--after N] [--limit N] [--server URL] [--token T]",
		args:  []string{"QUEUE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.StringVar(&v.state, "state", "", "only tasks in this state: delayed, ready, reserved or dead")
			fs.Uint64Var(&v.after, "after", 0, "the page after this job id (the last line's next)")
			fs.IntVar(&v.limit, "limit", api.DefaultListLimit, fmt.Sprintf("most tasks on the page: 1 to %d", api.MaxListLimit))
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			tasks, next, err := c.ListTasks(ctx, a[0], v.state, v.after, v.limit)
			if err != nil {
				return err
			}
			for _, t := range tasks {
				if err := writeJSON(out, t); err != nil {
					return err
				}
			}
			return writeJSON(out, struct {
				Next uint64 `json:"next"`
			}{next})
		},
	},
}

// runTaskCommand runs the subcommand name of taskCommands.
func runTaskCommand(name string, args []string, stdout, stderr io.Writer) int {
	tc := taskCommands[name]
	var (
		o clientOptions
		v taskFlags
	)
	fs := clientFlags(name, &o)
	if tc.flags != nil {
		tc.flags(fs, &v)
	}
	pos, err := parseArgs(fs, args, len(tc.args), len(tc.args), joinArgs(tc.args))
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

// taskUsages returns the usage lines of taskCommands, one a line, in the
// order of the list below.
func taskUsages() string {
	var s string
	for _, name := range []string{"get", "delete", "touch", "nack", "kick", "list"} {
		s += taskCommands[name].usage + "\n"
	}
	return s
}
