package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// TestSchedule_Runs: GET /v1/schedules/{name}/runs lists a schedule's
// occurrences with their tasks' outcomes, newest first, in pages (issue
// 44): acked and deleted from the history, pending with the task's state;
// the occurrences before the schedule was made are not runs. A bad limit
// or after is 400, an unknown schedule 404. The CLI lists them too
// (hourglass schedule NAME --runs).
func TestSchedule_Runs(t *testing.T) { engines(t, testSchedule_Runs) }

func testSchedule_Runs(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, err := c.SetSchedule(ctx, "tick", api.ScheduleRequest{Cron: "@every 1s", Queue: "r"}); err != nil {
		t.Fatal(err)
	}
	var all []api.ScheduleRun
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		runs, _, err := c.ScheduleRuns(ctx, "tick", "", api.MaxRunsLimit)
		if err != nil {
			t.Fatalf("runs: %v", err)
		}
		if len(runs) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs after 30 s of an every-second schedule: %+v", runs)
		}
	}
	if err := c.PauseSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	all = runPages(t, c, api.MaxRunsLimit)
	t.Logf("runs with limit %d: %d runs in %v (each page looks at up to %d occurrences, two lookups each)",
		api.MaxRunsLimit, len(all), time.Since(began), 4*api.MaxRunsLimit)
	if len(all) < 4 {
		t.Fatalf("runs of the paused schedule: %+v", all)
	}
	oldest, second := all[len(all)-1], all[len(all)-2]
	tasks, err := c.Reserve(ctx, "r", 1, 0)
	if err != nil || len(tasks) != 1 || tasks[0].ID != oldest.TaskID {
		t.Fatalf("reserve: %+v, %v; want %s", tasks, err, oldest.TaskID)
	}
	if err := c.Ack(ctx, "r", tasks[0].ID, tasks[0].Lease); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "r", second.TaskID); err != nil {
		t.Fatal(err)
	}

	// Page by page, two at a time.
	got := runPages(t, c, 2)
	if len(got) != len(all) {
		t.Fatalf("pages of 2 listed %d runs, one page of %d: %+v", len(got), len(all), got)
	}
	for i, r := range got {
		if r.TaskID != "tick@"+r.Time.UTC().Format(time.RFC3339) || r.TaskID != all[i].TaskID {
			t.Errorf("run %d: %+v, want the task id tick@TIME and %s", i, r, all[i].TaskID)
		}
		if i > 0 && !r.Time.Before(got[i-1].Time) {
			t.Errorf("run %d at %v not older than the one before, %v", i, r.Time, got[i-1].Time)
		}
		want, state := "pending", "ready"
		switch i {
		case len(got) - 1:
			want, state = api.FinishedAcked, ""
		case len(got) - 2:
			want, state = api.FinishedDeleted, ""
		}
		if r.Outcome != want || r.State != state || (state == "") != (r.Finished != nil) {
			t.Errorf("run %d (%s): %+v, want outcome %s, state %q", i, r.TaskID, r, want, state)
		}
	}

	// The CLI: a JSON line a run, then the next page's after.
	out, stderr, code := runCLI(t, nil, "schedule", "tick", "--runs", "--limit", "2", "--server", s.url())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first api.ScheduleRun
	var last struct{ Next string }
	if code != 0 || len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.TaskID != all[0].TaskID ||
		json.Unmarshal([]byte(lines[2]), &last) != nil || last.Next == "" {
		t.Errorf("hourglass schedule tick --runs --limit 2: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	if _, _, err := c.ScheduleRuns(ctx, "none", "", 0); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("runs of no schedule: %v, want not found", err)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "after=yesterday"} {
		if a := s.call("GET", "/v1/schedules/tick/runs?"+q, ""); a.status != 400 {
			t.Errorf("runs?%s: %v, want 400", q, a)
		}
	}
}

// runPages lists every run of schedule tick, limit a page.
func runPages(t *testing.T, c *client.Client, limit int) []api.ScheduleRun {
	t.Helper()
	var got []api.ScheduleRun
	after := ""
	for range 1000 {
		page, next, err := c.ScheduleRuns(context.Background(), "tick", after, limit)
		if err != nil || len(page) > limit {
			t.Fatalf("page after %q: %+v, %v", after, page, err)
		}
		got = append(got, page...)
		if next == "" {
			return got
		}
		after = next
	}
	t.Fatalf("runs: no end after 1000 pages")
	return nil
}
