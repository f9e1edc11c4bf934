package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestBulk_HTTP drives the operator's console over HTTP (api/bulk.go):
// GET /v1/queues/{q}/tasks with filters, paged by next; the bulk routes'
// dry runs, counts and resulting states, a move with a clash; bad
// filters answered 400 naming the parameter, with nothing changed.
func TestBulk_HTTP(t *testing.T) { engines(t, testBulkHTTP) }

// bulkSetup puts into queue "ops" of s: ready r-1..r-4, and dead x-1,
// x-2 (last error "timeout after 5s") and x-3 ("bad input").
func bulkSetup(t *testing.T, s *server) {
	t.Helper()
	c := s.client()
	ctx := context.Background()
	one := 1
	for i, why := range []string{"timeout after 5s", "timeout after 5s", "bad input"} {
		id := fmt.Sprintf("x-%d", i+1)
		if _, _, err := c.Put(ctx, "ops", api.PutRequest{ID: id, MaxAttempts: one}); err != nil {
			t.Fatal(err)
		}
		r, err := c.Reserve(ctx, "ops", 1, 0)
		if err != nil || len(r) != 1 || r[0].ID != id {
			t.Fatalf("reserve %s: %+v, %v", id, r, err)
		}
		if _, err := c.Nack(ctx, "ops", id, r[0].Lease, 0, why); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 4; i++ {
		if _, _, err := c.Put(ctx, "ops", api.PutRequest{ID: fmt.Sprintf("r-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func testBulkHTTP(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	bulkSetup(t, s)

	ids := func(path string) (string, string) {
		t.Helper()
		a := s.call("GET", path, "")
		var out api.TasksResponse
		if a.status != 200 || json.Unmarshal(a.body, &out) != nil {
			t.Fatalf("GET %s: %s", path, a)
		}
		var got []string
		for _, tk := range out.Tasks {
			if tk.Payload != nil && string(tk.Payload) != "null" {
				t.Fatalf("GET %s: a payload in %s", path, a)
			}
			got = append(got, tk.ID)
		}
		return strings.Join(got, " "), out.Next
	}
	for path, want := range map[string]string{
		"/v1/queues/ops/tasks?error=timeout":                                  "x-1 x-2",
		"/v1/queues/ops/tasks?state=dead&error=bad":                           "x-3",
		"/v1/queues/ops/tasks?id_prefix=r-":                                   "r-1 r-2 r-3 r-4",
		"/v1/queues/ops/tasks?id_prefix=r-&state=dead":                        "",
		"/v1/queues/ops/tasks?due_after=2000-01-01T00:00:00Z":                 "x-1 x-2 x-3 r-1 r-2 r-3 r-4",
		"/v1/queues/ops/tasks?due_before=2000-01-01T00:00:00Z":                "",
		"/v1/queues/ops/tasks?created_after=2200-01-01T00:00:00Z":             "",
		"/v1/queues/ops/tasks?created_before=2200-01-01T00:00:00Z&state=dead": "x-1 x-2 x-3",
	} {
		if got, next := ids(path); got != want || next != "" {
			t.Errorf("GET %s: %q next %q, want %q", path, got, next, want)
		}
	}
	// Paging by next through more than a page.
	var all []string
	path := "/v1/queues/ops/tasks?id_prefix=r-&limit=3"
	for pages := 0; pages < 10; pages++ {
		got, next := ids(path)
		all = append(all, got)
		if next == "" {
			break
		}
		path = "/v1/queues/ops/tasks?id_prefix=r-&limit=3&after=" + url.QueryEscape(next)
	}
	if got := strings.Join(all, " "); got != "r-1 r-2 r-3 r-4" || len(all) != 2 {
		t.Fatalf("pages of 3: %q", all)
	}

	// Due order, whatever the order of the puts: pages of 2 by the
	// opaque next, with and without a filter.
	c := s.client()
	for _, p := range []struct {
		id    string
		delay time.Duration
	}{{"e-1", 5 * time.Hour}, {"e-2", time.Hour}, {"e-3", 3 * time.Hour}, {"e-4", 0}, {"e-5", 2 * time.Hour}} {
		d := api.Duration(p.delay)
		if _, _, err := c.Put(context.Background(), "due", api.PutRequest{ID: p.id, Delay: &d}); err != nil {
			t.Fatal(err)
		}
	}
	for first, want := range map[string]string{
		"/v1/queues/due/tasks?limit=2":               "e-4 e-2 e-5 e-3 e-1",
		"/v1/queues/due/tasks?limit=2&state=delayed": "e-2 e-5 e-3 e-1",
		"/v1/queues/due/tasks?limit=2&id_prefix=e-":  "e-4 e-2 e-5 e-3 e-1",
		"/v1/queues/due/tasks?limit=1&due_after=" + url.QueryEscape(time.Now().Add(90*time.Minute).UTC().Format(time.RFC3339)): "e-5 e-3 e-1",
	} {
		var all []string
		path := first
		for pages := 0; pages < 10; pages++ {
			got, next := ids(path)
			if got != "" {
				all = append(all, got)
			}
			if next == "" {
				break
			}
			path = first + "&after=" + url.QueryEscape(next)
		}
		if got := strings.Join(all, " "); got != want {
			t.Errorf("GET %s, paged: %q, want %q", first, got, want)
		}
	}

	// Bad filters: 400 naming the parameter, nothing changed.
	for path, word := range map[string]string{
		"/v1/queues/ops/tasks?state=gone&error=x":                                                     "state",
		"/v1/queues/ops/tasks?due_after=yesterday":                                                    "due_after",
		"/v1/queues/ops/tasks?created_after=2020-01-02T00:00:00Z&created_before=2020-01-01T00:00:00Z": "created_after",
		"/v1/queues/ops/tasks?error=" + strings.Repeat("e", api.MaxFilterText+1):                      "error",
		"/v1/queues/ops/tasks?key=a%20b":                                                              "key",
		"/v1/queues/ops/tasks?error=x&limit=0":                                                        "limit",
		"/v1/queues/ops/tasks?after=12":                                                               "after",
		"/v1/queues/ops/tasks?error=x&after=AQAAAAAAAAAB":                                             "after",
	} {
		a := s.call("GET", path, "")
		if a.status != 400 || !strings.Contains(string(a.body), `"error":"hourglass: `) || !strings.Contains(string(a.body), word) {
			t.Errorf("GET %s: %s; want 400 naming %s", path[:min(len(path), 80)], a, word)
		}
	}
	for _, c := range []struct{ path, body, word string }{
		{"/v1/queues/ops/tasks:delete", `{"state":"gone"}`, "state"},
		{"/v1/queues/ops/tasks:delete", `{"due_after":"2020-01-02T00:00:00Z","due_before":"2020-01-01T00:00:00Z"}`, "due_after"},
		{"/v1/queues/ops/tasks:delete", `{"nope":1}`, ""},
		{"/v1/queues/ops/tasks:delete", `{"key":"a/b"}`, "key"},
		{"/v1/queues/ops/tasks:delete", `{"to":"other"}`, "to"},
		{"/v1/queues/ops/tasks:move", `{}`, "to"},
		{"/v1/queues/ops/tasks:move", `{"to":"ops"}`, "to"},
	} {
		a := s.call("POST", c.path, c.body)
		if a.status != 400 || !strings.Contains(string(a.body), `"error":"hourglass: `) || !strings.Contains(string(a.body), c.word) {
			t.Errorf("POST %s %s: %s; want 400 naming %q", c.path, c.body, a, c.word)
		}
	}
	if got, _ := ids("/v1/queues/ops/tasks?id_prefix="); got != "x-1 x-2 x-3 r-1 r-2 r-3 r-4" {
		t.Fatalf("after bad requests: %q", got)
	}

	bulk := func(action, body string, matched, changed int) api.BulkResponse {
		t.Helper()
		a := s.call("POST", "/v1/queues/ops/tasks:"+action, body)
		var out api.BulkResponse
		if a.status != 200 || json.Unmarshal(a.body, &out) != nil || out.Matched != matched || out.Changed != changed {
			t.Fatalf("POST tasks:%s %s: %s; want %d matched, %d changed", action, body, a, matched, changed)
		}
		return out
	}
	bulk("delete", `{"state":"dead","dry_run":true}`, 3, 0)
	bulk("kick", `{"error":"timeout"}`, 2, 2)
	if got, _ := ids("/v1/queues/ops/tasks?id_prefix=x&state=ready"); got != "x-1 x-2" {
		t.Fatalf("ready after the kick: %q", got)
	}
	bulk("retry", `{"state":"dead"}`, 1, 1)
	if _, _, err := s.client().Put(context.Background(), "ops2", api.PutRequest{ID: "r-2"}); err != nil {
		t.Fatal(err)
	}
	if out := bulk("move", `{"id_prefix":"r-","to":"ops2"}`, 4, 3); out.Clashed != 1 || len(out.Clashes) != 1 || out.Clashes[0] != "r-2" {
		t.Fatalf("move's clashes: %+v", out)
	}
	if got, _ := ids("/v1/queues/ops2/tasks?id_prefix="); got != "r-1 r-3 r-4 r-2" {
		t.Fatalf("ops2 after the move: %q", got)
	}
	bulk("delete", `{}`, 4, 4)
	if got, _ := ids("/v1/queues/ops/tasks?id_prefix="); got != "" {
		t.Fatalf("ops after deleting all: %q", got)
	}
}

// TestBulk_CLI drives `hourglass tasks`: a filtered list, a dry run and
// each action.
func TestBulk_CLI(t *testing.T) { engines(t, testBulkCLI) }

func testBulkCLI(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	bulkSetup(t, s)
	cli := s.cli
	list := func(args ...string) string {
		t.Helper()
		out, stderr, code := cli(append([]string{"tasks", "ops"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || lines[len(lines)-1] != `{"next":""}` {
			t.Fatalf("tasks ops %v: %d %q %q", args, code, out, stderr)
		}
		var got []string
		for _, l := range lines[:len(lines)-1] {
			var tk api.Task
			if err := json.Unmarshal([]byte(l), &tk); err != nil {
				t.Fatalf("not a task: %q", l)
			}
			got = append(got, tk.ID)
		}
		return strings.Join(got, " ")
	}
	act := func(want string, args ...string) {
		t.Helper()
		out, stderr, code := cli(append([]string{"tasks", "ops"}, args...)...)
		if code != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("tasks ops %v: %d %q %q; want %s", args, code, out, stderr, want)
		}
	}
	if got := list("--state", "dead", "--error", "timeout"); got != "x-1 x-2" {
		t.Fatalf("tasks --state dead --error timeout: %q", got)
	}
	act(`{"matched":2,"changed":0}`, "--state", "dead", "--error", "timeout", "--kick", "--dry-run")
	act(`{"matched":2,"changed":2}`, "--state", "dead", "--error", "timeout", "--kick")
	act(`{"matched":1,"changed":1}`, "--state", "dead", "--retry")
	act(`{"matched":2,"changed":2}`, "--id-prefix", "x-", "--error", "timeout", "--move", "other")
	act(`{"matched":5,"changed":5}`, "--delete")
	if got := list(); got != "" {
		t.Fatalf("ops after --delete: %q", got)
	}
	out, _, code := runCLI(t, nil, "tasks", "other", "--server", s.url())
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("tasks other: %d %q", code, out)
	}
	// Two actions, or a dry run without one, are usage errors.
	if _, stderr, code := cli("tasks", "ops", "--delete", "--kick"); code != 2 || !strings.Contains(stderr, "usage: hourglass tasks") {
		t.Fatalf("two actions: %d %q", code, stderr)
	}
	if _, stderr, code := cli("tasks", "ops", "--dry-run"); code != 2 {
		t.Fatalf("--dry-run alone: %d %q", code, stderr)
	}
	if _, stderr, code := cli("tasks", "ops", "--due-after", "soon"); code != 2 || !strings.Contains(stderr, "--due-after") {
		t.Fatalf("a bad time: %d %q", code, stderr)
	}
}
