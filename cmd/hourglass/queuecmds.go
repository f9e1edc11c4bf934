package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The client subcommands on a queue (pause, resume, policy) and on cron
// schedules (schedule), in the form of taskCommands (taskcmds.go): a
// usage line, positional arguments, flags, a check of the flags that go
// together, and the call.

// queueCommands are the subcommands by name.
var queueCommands = map[string]taskCommand{
	"pause": {
		usage: "usage: hourglass pause QUEUE [--for D] [--server URL] [--token T]",
		args:  []string{"QUEUE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.Func("for", "how long the queue hands out nothing, like 10m (default: until resumed)", func(s string) error {
				d, err := parseDuration(s)
				if err == nil && d <= 0 {
					err = errors.New("want more than 0s (resume ends a pause)")
				}
				v.pauseFor = d.D()
				return err
			})
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, _ io.Writer) error {
			return c.Pause(ctx, a[0], v.pauseFor)
		},
	},
	"resume": {
		usage: "usage: hourglass resume QUEUE [--server URL] [--token T]",
		args:  []string{"QUEUE"},
		call: func(ctx context.Context, c *client.Client, a []string, _ *taskFlags, _ io.Writer) error {
			return c.Resume(ctx, a[0])
		},
	},
	"policy": {
		usage: "usage: hourglass policy QUEUE [--set JSON | --set-file FILE [--replace] | --delete] [--server URL] [--token T]",
		args:  []string{"QUEUE"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.StringVar(&v.set, "set", "", `merge this JSON into the queue's policy (a JSON merge patch: null removes a field), like '{"retry":{"initial":"1s","max":"1m","multiplier":2,"jitter":0.1},"max_attempts":5}'`)
			fs.StringVar(&v.setFile, "set-file", "", `merge the JSON in this file ("-": standard input) into the queue's policy`)
			fs.BoolVar(&v.replace, "replace", false, "with --set or --set-file: make the JSON the whole policy, dropping every field it leaves out")
			fs.BoolVar(&v.delete, "delete", false, "make the queue's policy the default again")
		},
		check: func(_ []string, v *taskFlags) error {
			n := 0
			for _, given := range []bool{v.set != "", v.setFile != "", v.delete} {
				if given {
					n++
				}
			}
			if n > 1 {
				return errors.New("give one of --set, --set-file and --delete")
			}
			if v.replace && v.set == "" && v.setFile == "" {
				return errors.New("--replace goes with --set or --set-file")
			}
			if v.setFile != "" {
				b, err := readFileArg(v.setFile)
				if err != nil {
					return err
				}
				v.set = string(b)
			}
			if v.set == "" {
				return nil
			}
			if err := decodePolicy(v.set, &v.policy); err != nil || v.replace {
				return err
			}
			return checkPatch([]byte(v.set))
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			var (
				p   api.Policy
				err error
			)
			switch {
			case v.delete:
				return c.DeletePolicy(ctx, a[0])
			case v.set != "" && v.replace:
				p, err = c.SetPolicy(ctx, a[0], v.policy)
			case v.set != "":
				p, err = c.PatchPolicy(ctx, a[0], []byte(v.set)) // policymerge.go
			default:
				p, err = c.Policy(ctx, a[0])
			}
			if err != nil {
				return err
			}
			return writeJSON(out, p)
		},
	},
	"schedule": {
		usage:    "usage: hourglass schedule [NAME [--cron LINE --queue Q [--payload JSON] [--timezone Z] [--misfire skip|one|all] [--catch-up D] [--overlap allow|skip] [--priority N] [--ttr D] [--max-attempts N] [--paused] | --delete | --run | --pause | --resume | --runs [--after T] [--limit N]]] [--server URL] [--token T]",
		optional: []string{"NAME"},
		flags: func(fs *flag.FlagSet, v *taskFlags) {
			fs.StringVar(&v.cron, "cron", "", `create or replace the schedule: a cron line like "0 3 * * *" or "@every 1h"`)
			fs.StringVar(&v.queue, "queue", "", "the queue each occurrence puts a task into")
			fs.StringVar(&v.payload, "payload", "", "the tasks' payload: JSON, or text sent as a JSON string")
			fs.StringVar(&v.timezone, "timezone", "", "IANA zone the cron line is read in (default UTC)")
			fs.StringVar(&v.sched.Misfire, "misfire", "", "occurrences missed while no server ran: skip, one (the newest; default) or all (within --catch-up)")
			fs.Func("catch-up", "how far back --misfire all reaches (default 24h)", func(s string) error {
				d, err := parseDuration(s)
				v.sched.CatchUp = &d
				return err
			})
			fs.StringVar(&v.sched.Overlap, "overlap", "", "allow (default) or skip: skip an occurrence while the previous task is waiting or reserved")
			fs.Func("priority", "the tasks' priority, lower first: 0 to 4294967295 (default 1024)", func(s string) error {
				n, err := strconv.ParseUint(s, 10, 32)
				p := uint32(n)
				v.sched.Priority = &p
				return err
			})
			fs.Func("ttr", "the tasks' lease (default the queue's or the server's)", func(s string) error {
				d, err := parseDuration(s)
				v.sched.TTR = &d
				return err
			})
			fs.Func("max-attempts", "reservations without an ack before a task is dead; 0: the queue's (default 25), -1: unlimited", func(s string) error {
				n, err := strconv.Atoi(s)
				v.sched.MaxAttempts = &n
				return err
			})
			fs.BoolVar(&v.sched.Paused, "paused", false, "create or replace it paused")
			fs.BoolVar(&v.delete, "delete", false, "delete the schedule (the tasks it put stay)")
			fs.BoolVar(&v.run, "run", false, "put a task of the schedule now and print it")
			fs.BoolVar(&v.pause, "pause", false, "pause the schedule: it puts nothing until resumed")
			fs.BoolVar(&v.resume, "resume", false, "resume the schedule from now (no catch-up)")
			fs.BoolVar(&v.runs, "runs", false, "list the schedule's occurrences with their tasks' outcomes, newest first, a JSON line each, then the next page's after")
			fs.StringVar(&v.runsAfter, "after", "", "with --runs: the page after this time (the last line's next)")
			fs.IntVar(&v.limit, "limit", api.DefaultRunsLimit, fmt.Sprintf("with --runs: most runs on the page, 1 to %d", api.MaxRunsLimit))
		},
		check: func(a []string, v *taskFlags) error {
			o := v.sched
			setting := v.cron != "" || v.queue != "" || v.payload != "" || v.timezone != "" || o.Misfire != "" ||
				o.CatchUp != nil || o.Overlap != "" || o.Priority != nil || o.TTR != nil || o.MaxAttempts != nil || o.Paused
			actions := 0
			for _, b := range []bool{setting, v.delete, v.run, v.pause, v.resume, v.runs} {
				if b {
					actions++
				}
			}
			switch {
			case len(a) == 0 && actions > 0:
				return errors.New("missing NAME")
			case actions > 1:
				return errors.New("give --cron and --queue or one of --delete, --run, --pause, --resume and --runs, not both")
			case setting && (v.cron == "" || v.queue == ""):
				return errors.New("a schedule needs --cron and --queue")
			case v.runs && (v.limit < 1 || v.limit > api.MaxRunsLimit):
				return fmt.Errorf("invalid value %d for flag --limit: want 1 to %d", v.limit, api.MaxRunsLimit)
			case !v.runs && v.runsAfter != "":
				return errors.New("--after goes with --runs")
			}
			return nil
		},
		call: func(ctx context.Context, c *client.Client, a []string, v *taskFlags, out io.Writer) error {
			if len(a) == 0 {
				all, err := c.Schedules(ctx)
				for _, s := range all {
					if err == nil {
						err = writeJSON(out, s)
					}
				}
				return err
			}
			name := a[0]
			switch {
			case v.delete:
				return c.DeleteSchedule(ctx, name)
			case v.pause:
				return c.PauseSchedule(ctx, name)
			case v.resume:
				return c.ResumeSchedule(ctx, name)
			case v.runs:
				runs, next, err := c.ScheduleRuns(ctx, name, v.runsAfter, v.limit)
				if errors.Is(err, client.ErrNotFound) {
					return fmt.Errorf("no such schedule %q", name)
				}
				if err != nil {
					return err
				}
				for _, r := range runs {
					if err := writeJSON(out, r); err != nil {
						return err
					}
				}
				return writeJSON(out, struct {
					Next string `json:"next"`
				}{next})
			case v.run:
				t, err := c.RunSchedule(ctx, name)
				if err != nil {
					return err
				}
				return writeJSON(out, t)
			case v.cron != "":
				req := v.sched
				req.Cron, req.Queue, req.Timezone = v.cron, v.queue, v.timezone
				if v.payload != "" {
					p, err := payloadArg(v.payload)
					if err != nil {
						return err
					}
					req.Payload = p
				}
				s, err := c.SetSchedule(ctx, name, req)
				if err != nil {
					return err
				}
				return writeJSON(out, s)
			}
			s, err := c.Schedule(ctx, name)
			if errors.Is(err, client.ErrNotFound) {
				return fmt.Errorf("no such schedule %q", name)
			}
			if err != nil {
				return err
			}
			return writeJSON(out, s)
		},
	},
}

// decodePolicy decodes a policy given on the command line as the server
// would, strictly: unknown fields and trailing data are usage errors, so
// that a misspelt field is not quietly left out. Values out of range are
// the server's to refuse.
func decodePolicy(s string, p *api.Policy) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return fmt.Errorf("policy: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errors.New("policy: trailing data after the JSON object")
	}
	return api.CheckPolicyBody(*p, []byte(s))
}

// readFileArg reads the file name, or standard input for "-".
func readFileArg(name string) ([]byte, error) {
	if name == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		return bytes.TrimSpace(b), nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b), nil
}
