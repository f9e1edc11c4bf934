package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The client subcommands on the history (attempts, history), in the form
// of taskCommands (taskcmds.go). They print as list does: a line of JSON
// per attempt or task, and for history a last line with the next page's
// cursor.

// historyCommands are the subcommands by name.
var historyCommands = map[string]taskCommand{
	"attempts": {
		usage: "usage: hourglass attempts QUEUE ID [--server URL] [--token T]",
		args:  []string{"QUEUE", "ID"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, out io.Writer) error {
			as, err := c.Attempts(ctx, a[0], a[1])
			if err != nil {
				return err
			}
			for _, at := range as {
				if err := writeJSON(out, at); err != nil {
					return err
				}
			}
			return nil
		},
	},
	"history": {
		usage: "usage: hourglass history QUEUE [--outcome O] [--after N] [--limit N] [--server URL] [--token T]",
		args:  []string{"QUEUE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.Func("outcome", "only tasks that left the queue so: acked, dead, deleted or cancelled", func(s string) error {
				switch s {
				case api.FinishedAcked, api.FinishedDead, api.FinishedDeleted, api.FinishedCancelled:
					v.outcome = s
					return nil
				}
				return errors.New("want acked, dead, deleted or cancelled")
			})
			fs.Uint64Var(&v.after, "after", 0, "the page after this cursor (the last line's next)")
			fs.IntVar(&v.limit, "limit", api.DefaultListLimit, fmt.Sprintf("most tasks on the page: 1 to %d", api.MaxListLimit))
		},
		check: func(_ []string, v *taskFlags) error {
			if v.limit < 1 || v.limit > api.MaxListLimit {
				return fmt.Errorf("invalid value %d for flag --limit: want 1 to %d", v.limit, api.MaxListLimit)
			}
			return nil
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			fs, next, err := c.History(ctx, a[0], v.outcome, v.after, v.limit)
			if err != nil {
				return err
			}
			for _, f := range fs {
				if err := writeJSON(out, f); err != nil {
					return err
				}
			}
			return writeJSON(out, struct {
				Next uint64 `json:"next"`
			}{next})
		},
	},
}
