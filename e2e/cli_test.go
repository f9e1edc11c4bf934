package e2e_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestCLI_Tasks drives the client subcommands on single tasks (get,
// touch, nack, kick, delete, list) against a server, and checks that
// reserve says on stderr when nothing came, and exits 2.
func TestCLI_Tasks(t *testing.T) { engines(t, testCLITasks) }

func testCLITasks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	one := 1
	for _, id := range []string{"t1", "t2"} {
		if _, _, err := c.Put(ctx, "cli", api.PutRequest{ID: id, MaxAttempts: one}); err != nil {
			t.Fatal(err)
		}
	}
	cli := s.cli
	task := func(out string) api.Task { t.Helper(); return taskOf(t, out) }

	out, stderr, code := cli("get", "cli", "t1")
	if code != 0 || task(out).ID != "t1" || task(out).State != api.StateReady {
		t.Fatalf("get: %d %q %q", code, out, stderr)
	}
	out, stderr, code = cli("list", "cli", "--state", "ready", "--limit", "1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var next struct{ Next string }
	if code != 0 || len(lines) != 2 || task(lines[0]).ID != "t1" || json.Unmarshal([]byte(lines[1]), &next) != nil || next.Next == "" {
		t.Fatalf("list --limit 1: %d %q %q", code, out, stderr)
	}
	// The next page, after the opaque cursor the last line gave.
	out, stderr, code = cli("list", "cli", "--state", "ready", "--limit", "1", "--after", next.Next)
	if lines = strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) < 2 || task(lines[0]).ID == "t1" {
		t.Fatalf("list --after %s: %d %q %q", next.Next, code, out, stderr)
	}

	r, err := c.Reserve(ctx, "cli", 1, 0)
	if err != nil || len(r) != 1 {
		t.Fatal(r, err)
	}
	out, stderr, code = cli("touch", "cli", r[0].ID, r[0].Lease)
	if code != 0 || task(out).Lease != r[0].Lease {
		t.Fatalf("touch: %d %q %q", code, out, stderr)
	}
	if _, stderr, code = cli("nack", "cli", r[0].ID, "stale"); code != 1 || !strings.Contains(stderr, "hourglass: ") {
		t.Errorf("nack with a stale lease: %d %q", code, stderr)
	}
	if _, stderr, code = cli("nack", "cli", r[0].ID, r[0].Lease); code != 0 {
		t.Fatalf("nack: %d %q", code, stderr)
	}
	// Its one attempt used, the task is dead: kick makes it ready.
	if tk, err := c.Get(ctx, "cli", r[0].ID); err != nil || tk.State != api.StateDead {
		t.Fatalf("after the nack: %+v %v", tk, err)
	}
	if _, stderr, code = cli("kick", "cli", r[0].ID); code != 0 {
		t.Fatalf("kick: %d %q", code, stderr)
	}
	if _, stderr, code = cli("delete", "cli", "t2"); code != 0 {
		t.Fatalf("delete: %d %q", code, stderr)
	}
	// A deleted task is answered by its finished record while the
	// history keeps it.
	if out, stderr, code = cli("get", "cli", "t2"); code != 0 || !strings.Contains(out, `"state":"finished"`) || !strings.Contains(out, `"deleted"`) {
		t.Errorf("get of a deleted task: %d %q %q; want its finished record", code, out, stderr)
	}
	// cancel deletes a task recording it cancelled; a second cancel is
	// an error.
	if _, stderr, code = cli("cancel", "cli", r[0].ID); code != 0 {
		t.Fatalf("cancel: %d %q", code, stderr)
	}
	if out, stderr, code = cli("get", "cli", r[0].ID); code != 0 || !strings.Contains(out, `"outcome":"cancelled"`) {
		t.Errorf("get of a cancelled task: %d %q %q; want its finished record, cancelled", code, out, stderr)
	}
	if _, stderr, code = cli("cancel", "cli", r[0].ID); code != 1 || !strings.Contains(stderr, "hourglass: ") {
		t.Errorf("a second cancel: %d %q; want 1 and the error", code, stderr)
	}
	if _, stderr, code = cli("get", "cli", "never"); code != 1 || !strings.Contains(stderr, "hourglass: ") {
		t.Errorf("get of a task never put: %d %q", code, stderr)
	}
	if _, stderr, code = cli("get", "cli"); code != 2 || !strings.Contains(stderr, "usage: hourglass get QUEUE ID") {
		t.Errorf("get without an id: %d %q", code, stderr)
	}
	out, stderr, code = cli("reserve", "empty")
	if code != 2 || out != "" || !strings.Contains(stderr, "no task of empty was ready") {
		t.Errorf("reserve of an empty queue: %d %q %q; want exit 2", code, out, stderr)
	}
}

// TestCLI_Policies drives the subcommands of policies (--set merging,
// --replace replacing), pauses, release, bury and schedules against a
// server: what each prints, what the server then holds, and a server's
// refusal as one line and exit 1.
func TestCLI_Policies(t *testing.T) { engines(t, testCLIPolicies) }

func testCLIPolicies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	cli := s.cli
	task := func(out string) api.Task { t.Helper(); return taskOf(t, out) }

	// policy: set, print, refuse, delete.
	const (
		p        = `{"retry":{"initial":"1h","max":"2h","multiplier":2,"jitter":0},"max_attempts":3}`
		policy   = `{"retry":{"initial":"1h0m0s","max":"2h0m0s","multiplier":2,"jitter":0},"max_attempts":3`
		recorded = policy + `,"effective":` + policy + `,"ttr":"1m0s"}}`
	)
	out, stderr, code := cli("policy", "cq", "--set", p)
	if code != 0 || strings.TrimSpace(out) != recorded {
		t.Fatalf("policy --set: %d %q %q", code, out, stderr)
	}
	if out, stderr, code = cli("policy", "cq"); code != 0 || strings.TrimSpace(out) != recorded {
		t.Errorf("policy: %d %q %q", code, out, stderr)
	}
	// --set merges into the stored policy; --replace makes it the whole.
	merged := strings.Replace(recorded, `"max_attempts":3`, `"max_attempts":5,"dead_letter":"cq-dead"`, 1)
	merged = strings.Replace(merged, `"max_attempts":3`, `"max_attempts":5`, 1) // the effective values
	if out, stderr, code = cli("policy", "cq", "--set", `{"max_attempts":5,"dead_letter":"cq-dead"}`); code != 0 || strings.TrimSpace(out) != merged {
		t.Errorf("policy --set of two fields: %d %q %q; want %s", code, out, stderr, merged)
	}
	if out, stderr, code = cli("policy", "cq", "--set", p, "--replace"); code != 0 || strings.TrimSpace(out) != recorded {
		t.Errorf("policy --set --replace: %d %q %q; want %s", code, out, stderr, recorded)
	}
	_, stderr, code = cli("policy", "cq", "--set", `{"retry":{"initial":"-1s","max":"1s","multiplier":2,"jitter":0}}`)
	if code != 1 || !strings.HasPrefix(stderr, "hourglass: ") || !strings.Contains(stderr, "retry.initial") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("policy --set of a bad policy: %d %q; want exit 1, one line naming retry.initial", code, stderr)
	}
	if _, stderr, code = cli("policy", "cq", "--set", `{"colour":1}`); code != 2 || !strings.Contains(stderr, "colour") {
		t.Errorf("policy --set with an unknown field: %d %q; want a usage error", code, stderr)
	}

	// nack without --delay takes the retry policy's; --error is kept.
	if _, _, err := c.Put(ctx, "cq", api.PutRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	r := reserveOne(t, c, "cq", time.Second)
	out, stderr, code = cli("nack", "cq", "a", r.Lease, "--error", "disk full")
	if tk := task(out); code != 0 || tk.State != api.StateDelayed || tk.LastError != "disk full" || time.Until(tk.Due) < 59*time.Minute {
		t.Fatalf("nack --error: %d %q %q; want delayed an hour by the policy", code, out, stderr)
	}
	// release and bury.
	if _, _, err := c.Put(ctx, "cq", api.PutRequest{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	r = reserveOne(t, c, "cq", time.Second)
	out, stderr, code = cli("release", "cq", "b", r.Lease, "--delay", "1h")
	if tk := task(out); code != 0 || tk.State != api.StateDelayed || tk.Attempts != 0 {
		t.Fatalf("release --delay 1h: %d %q %q", code, out, stderr)
	}
	if err := c.Kick(ctx, "cq", "b"); err == nil {
		t.Errorf("kick of a delayed task succeeded")
	}
	if _, _, err := c.Put(ctx, "cq", api.PutRequest{ID: "d"}); err != nil {
		t.Fatal(err)
	}
	r = reserveOne(t, c, "cq", time.Second)
	out, stderr, code = cli("bury", "cq", "d", r.Lease, "--error", "poison")
	if tk := task(out); code != 0 || tk.State != api.StateDead || tk.LastError != "poison" {
		t.Fatalf("bury --error: %d %q %q", code, out, stderr)
	}
	if out, stderr, code = cli("policy", "cq", "--delete"); code != 0 || out != "" {
		t.Errorf("policy --delete: %d %q %q", code, out, stderr)
	}
	const defaults = `{"effective":{"retry":{"initial":"1s","max":"1h0m0s","multiplier":2,"jitter":0.1},"max_attempts":25,"ttr":"1m0s"}}`
	if out, _, _ = cli("policy", "cq"); strings.TrimSpace(out) != defaults {
		t.Errorf("policy after --delete: %q; want the defaults as effective, %s", out, defaults)
	}

	// pause and resume.
	if _, stderr, code = cli("pause", "cq", "--for", "1h"); code != 0 {
		t.Fatalf("pause --for 1h: %d %q", code, stderr)
	}
	if q := queueOf(t, c, "cq"); !q.Paused || q.PausedUntil == nil || time.Until(*q.PausedUntil) < 59*time.Minute {
		t.Errorf("after pause --for 1h: %+v", q)
	}
	if _, stderr, code = cli("pause", "cq"); code != 0 {
		t.Fatalf("pause: %d %q", code, stderr)
	}
	if q := queueOf(t, c, "cq"); !q.Paused || q.PausedUntil != nil {
		t.Errorf("after pause: %+v; want paused until resumed", q)
	}
	if out, stderr, code = cli("queues"); code != 0 || !strings.Contains(out, "PAUSED") || !strings.Contains(out, "until resumed") {
		t.Errorf("queues of a paused queue: %d %q %q", code, out, stderr)
	}
	if _, stderr, code = cli("resume", "cq"); code != 0 {
		t.Fatalf("resume: %d %q", code, stderr)
	}
	if q := queueOf(t, c, "cq"); q.Paused {
		t.Errorf("after resume: %+v", q)
	}

	// schedule: set, print, list, delete.
	out, stderr, code = cli("schedule", "nightly", "--cron", "0 3 * * *", "--queue", "cq", "--payload", `{"k":1}`)
	if code != 0 || !strings.Contains(out, `"name":"nightly"`) || !strings.Contains(out, `"next":`) {
		t.Fatalf("schedule --cron: %d %q %q", code, out, stderr)
	}
	if out, stderr, code = cli("schedule", "nightly"); code != 0 || !strings.Contains(out, `"payload":{"k":1}`) {
		t.Errorf("schedule NAME: %d %q %q", code, out, stderr)
	}
	if out, stderr, code = cli("schedule"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("schedule: %d %q %q", code, out, stderr)
	}
	if _, stderr, code = cli("schedule", "nightly", "--delete"); code != 0 {
		t.Errorf("schedule --delete: %d %q", code, stderr)
	}
	if _, stderr, code = cli("schedule", "nightly"); code != 1 || !strings.HasPrefix(stderr, "hourglass: ") {
		t.Errorf("schedule of a deleted one: %d %q", code, stderr)
	}
}

// TestCLI_Version runs `hourglass version` and `--version` on the built
// binary and checks them against what `go version -m` reads from it: the
// module's version, and the VCS revision (with "(modified)") when the
// build recorded one, "revision unknown" when it did not
// (-buildvcs=false, a copy without its repository).
func TestCLI_Version(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := exec.CommandContext(ctx, "go", "version", "-m", hourglassBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	version, settings := "", map[string]string{}
	for line := range strings.Lines(string(info)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/hourglass-go/hourglass":
			version = f[2]
		case len(f) == 2 && f[0] == "build":
			if k, v, ok := strings.Cut(f[1], "="); ok {
				settings[k] = v
			}
		}
	}
	if version == "" {
		t.Fatalf("go version -m names no module version:\n%s", info)
	}
	want := "revision unknown"
	if rev := settings["vcs.revision"]; rev != "" {
		want = "revision " + rev
		if settings["vcs.modified"] == "true" {
			want += " (modified)"
		}
	}
	for _, arg := range []string{"version", "--version"} {
		out, stderr, code := runCLI(t, nil, arg)
		lines := strings.Split(out, "\n")
		if code != 0 || len(lines) < 4 || lines[0] != "hourglass "+version ||
			lines[1] != "module github.com/hourglass-go/hourglass "+version || lines[2] != want {
			t.Errorf("hourglass %s: exit %d, stdout %q, stderr %q; want hourglass %s, module ... %[4]s, %s", arg, code, out, stderr, version, want)
		}
	}
}
