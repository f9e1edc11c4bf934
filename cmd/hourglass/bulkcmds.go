package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// tasksUsage is the usage line of `hourglass tasks`, the operator's
// console (api/bulk.go): it lists the tasks of a queue that the filter
// flags match, or with one action flag acts on all of them.
const tasksUsage = "usage: hourglass tasks QUEUE [--state S] [--error TEXT] [--id-prefix P] [--key K] [--due-after T] [--due-before T] [--created-after T] [--created-before T] [--after C] [--limit N] [--delete | --kick | --retry | --move Q] [--dry-run] [--server URL] [--token T]"

// tasksFlags are the flags of `hourglass tasks`.
type tasksFlags struct {
	filter                                     api.Filter
	dueAfter, dueBefore, createdAfter, created string
	after                                      string
	limit                                      int
	del, kick, retry, dryRun                   bool
	move                                       string
}

// runTasks runs `hourglass tasks`: a list prints one line of JSON per
// task, in due order, and a last line {"next": C} (the --after of the
// next page, an opaque cursor; "" on the last page); an
// action prints the server's answer, {"matched": N, "changed": N, ...}.
func runTasks(args []string, stdout, stderr io.Writer) int {
	var (
		o clientOptions
		v tasksFlags
	)
	fs := clientFlags("tasks", &o)
	fs.StringVar(&v.filter.State, "state", "", "only tasks in this state: delayed, ready, reserved or dead")
	fs.StringVar(&v.filter.Error, "error", "", "only tasks whose last error holds this text")
	fs.StringVar(&v.filter.IDPrefix, "id-prefix", "", "only tasks whose id starts with this")
	fs.StringVar(&v.filter.Key, "key", "", "only tasks of this key")
	fs.StringVar(&v.dueAfter, "due-after", "", "only tasks due at or after this RFC 3339 time")
	fs.StringVar(&v.dueBefore, "due-before", "", "only tasks due before this RFC 3339 time")
	fs.StringVar(&v.createdAfter, "created-after", "", "only tasks put at or after this RFC 3339 time")
	fs.StringVar(&v.created, "created-before", "", "only tasks put before this RFC 3339 time")
	fs.StringVar(&v.after, "after", "", "a list's page after this cursor (the last line's next), in due order")
	fs.IntVar(&v.limit, "limit", api.DefaultListLimit, fmt.Sprintf("most tasks on a list's page: 1 to %d", api.MaxListLimit))
	fs.BoolVar(&v.del, "delete", false, "delete every task matched")
	fs.BoolVar(&v.kick, "kick", false, "make every dead task matched ready")
	fs.BoolVar(&v.retry, "retry", false, "make every dead or delayed task matched ready now")
	fs.StringVar(&v.move, "move", "", "move every task matched, not reserved, into this queue")
	fs.BoolVar(&v.dryRun, "dry-run", false, "with an action: only count the tasks matched")
	pos, err := parseArgs(fs, args, 1, 1, "QUEUE")
	action := ""
	if err == nil {
		action, err = v.check()
	}
	if err == nil {
		err = v.times()
	}
	if code := usageOr(err, fs, tasksUsage, stdout, stderr); code >= 0 {
		return code
	}
	c, err := o.newClient(fs, os.Getenv)
	if code := usageOr(err, fs, tasksUsage, stdout, stderr); code >= 0 {
		return code
	}
	ctx, cancel := clientContext()
	defer cancel()
	if action != "" {
		res, err := c.Bulk(ctx, pos[0], action, api.BulkRequest{Filter: v.filter, To: v.move, DryRun: v.dryRun})
		if err != nil {
			return callError(stderr, err)
		}
		if err := writeJSON(stdout, res); err != nil {
			return callError(stderr, err)
		}
		return 0
	}
	tasks, next, err := c.FindTasks(ctx, pos[0], v.filter, v.after, v.limit)
	if err != nil {
		return callError(stderr, err)
	}
	for _, t := range tasks {
		if err := writeJSON(stdout, t); err != nil {
			return callError(stderr, err)
		}
	}
	if err := writeJSON(stdout, struct {
		Next string `json:"next"`
	}{next}); err != nil {
		return callError(stderr, err)
	}
	return 0
}

// check returns the action the flags ask for ("" for a list), refusing
// two actions, or a flag of a list with an action.
func (v *tasksFlags) check() (string, error) {
	var actions []string
	for _, a := range []struct {
		on   bool
		name string
	}{{v.del, "delete"}, {v.kick, "kick"}, {v.retry, "retry"}, {v.move != "", "move"}} {
		if a.on {
			actions = append(actions, a.name)
		}
	}
	switch {
	case len(actions) > 1:
		return "", fmt.Errorf("give one of --delete, --kick, --retry and --move, not %d", len(actions))
	case len(actions) == 0 && v.dryRun:
		return "", errors.New("--dry-run goes with an action: --delete, --kick, --retry or --move")
	case len(actions) == 1 && v.after != "":
		return "", errors.New("--after pages a list, not an action")
	case len(actions) == 0:
		return "", nil
	}
	return actions[0], nil
}

// times parses the time flags into the filter.
func (v *tasksFlags) times() error {
	for _, f := range []struct {
		name, val string
		dst       **time.Time
	}{
		{"--due-after", v.dueAfter, &v.filter.DueAfter}, {"--due-before", v.dueBefore, &v.filter.DueBefore},
		{"--created-after", v.createdAfter, &v.filter.CreatedAfter}, {"--created-before", v.created, &v.filter.CreatedBefore},
	} {
		if f.val == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.val)
		if err != nil {
			return fmt.Errorf("%s %q: want an RFC 3339 time", f.name, f.val)
		}
		*f.dst = &t
	}
	return nil
}
