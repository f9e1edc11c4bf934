package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hourglass-go/hourglass/api"
)

// TestCLI_Tasks drives the client subcommands on single tasks (get,
// touch, nack, kick, delete, list) against a server, and checks that
// reserve says on stderr when nothing came.
func TestCLI_Tasks(t *testing.T) { engines(t, testCLITasks) }

func testCLITasks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	url := s.url()
	c := s.client()
	ctx := context.Background()
	one := 1
	for _, id := range []string{"t1", "t2"} {
		if _, _, err := c.Put(ctx, "cli", api.PutRequest{ID: id, MaxAttempts: one}); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		return runCLI(t, nil, append(args, "--server", url)...)
	}
	task := func(out string) api.Task {
		t.Helper()
		var tk api.Task
		if err := json.Unmarshal([]byte(out), &tk); err != nil {
			t.Fatalf("not a task: %q", out)
		}
		return tk
	}

	out, stderr, code := cli("get", "cli", "t1")
	if code != 0 || task(out).ID != "t1" || task(out).State != api.StateReady {
		t.Fatalf("get: %d %q %q", code, out, stderr)
	}
	out, stderr, code = cli("list", "cli", "--state", "ready", "--limit", "1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || task(lines[0]).ID != "t1" || !strings.HasPrefix(lines[1], `{"next":`) || lines[1] == `{"next":0}` {
		t.Fatalf("list --limit 1: %d %q %q", code, out, stderr)
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
	if _, stderr, code = cli("get", "cli", "t2"); code != 1 || !strings.Contains(stderr, "hourglass: ") {
		t.Errorf("get of a deleted task: %d %q", code, stderr)
	}
	if _, stderr, code = cli("get", "cli"); code != 2 || !strings.Contains(stderr, "usage: hourglass get QUEUE ID") {
		t.Errorf("get without an id: %d %q", code, stderr)
	}
	out, stderr, code = cli("reserve", "empty")
	if code != 0 || out != "" || !strings.Contains(stderr, "no task of empty was ready") {
		t.Errorf("reserve of an empty queue: %d %q %q", code, out, stderr)
	}
}
