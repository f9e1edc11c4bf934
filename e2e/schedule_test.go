package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
)

// TestSchedule runs an "@every 1s" schedule across a SIGKILL and a
// restart, and checks its occurrences: each is one task with the id
// NAME@TIME (TIME in RFC 3339) and the schedule's payload, handed out
// no earlier than TIME; no occurrence is put twice, the restart included
// (each is acknowledged at once, so a second put would be a second
// delivery); of the occurrences missed while the server was down, at most
// the newest is put; and none comes after the schedule is deleted.
func TestSchedule(t *testing.T) { engines(t, testSchedule) }

func testSchedule(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()

	sched, err := c.SetSchedule(ctx, "tick", api.ScheduleRequest{Cron: "@every 1s", Queue: "ticks", Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatalf("SetSchedule: %v", err)
	}
	if d := time.Until(sched.Next); d < -100*time.Millisecond || d > 1100*time.Millisecond {
		t.Errorf("next occurrence of @every 1s is %v from now", d)
	}
	// Replacing it keeps one schedule.
	if _, err := c.SetSchedule(ctx, "tick", api.ScheduleRequest{Cron: "@every 1s", Queue: "ticks", Payload: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatalf("SetSchedule again: %v", err)
	}

	type occurrence struct {
		id  string
		at  time.Time // from the id
		got time.Time // handed out
	}
	var (
		mu       sync.Mutex
		seen     []occurrence
		problems []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := reserveOnce(c, "ticks", 300*time.Millisecond)
			if r.err != nil {
				time.Sleep(50 * time.Millisecond) // the server is down
				continue
			}
			mu.Lock()
			for _, task := range r.tasks {
				name, ts, ok := strings.Cut(task.ID, "@")
				at, err := time.Parse(time.RFC3339, ts)
				switch {
				case !ok || name != "tick" || err != nil:
					problems = append(problems, "id "+task.ID+" is not tick@RFC3339")
				case string(task.Payload) != `{"n":2}`:
					problems = append(problems, "occurrence "+task.ID+" has payload "+string(task.Payload))
				case r.at.Before(at):
					problems = append(problems, "occurrence "+task.ID+" handed out at "+r.at.Format(time.RFC3339Nano))
				}
				seen = append(seen, occurrence{task.ID, at, r.at})
			}
			mu.Unlock()
			for _, task := range r.tasks {
				c.Ack(ctx, "ticks", task.ID, task.Lease)
			}
		}
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	waitFor := func(n int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d occurrences within %v, want %d", count(), within, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	waitFor(2, 5*time.Second)
	list, err := c.Schedules(ctx)
	if err != nil || len(list) != 1 || list[0].Last == nil || !list[0].Next.After(list[0].Last.Time) {
		t.Errorf("Schedules: %+v, %v; want one with last and next after it", list, err)
	}

	s.kill()
	killedAt := time.Now()              // the old process is gone: it put nothing after this
	time.Sleep(3200 * time.Millisecond) // three occurrences or so fall due while down
	s.start()
	recovered := s.logTime("hourglass: recovered")
	n := count()
	waitFor(n+2, 5*time.Second)

	if err := c.DeleteSchedule(ctx, "tick"); err != nil {
		t.Fatalf("DeleteSchedule: %v", err)
	}
	deletedAt := time.Now()
	time.Sleep(1500 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	ids := map[string]int{}
	missed := 0
	for _, o := range seen {
		ids[o.id]++
		if ids[o.id] == 2 {
			t.Errorf("occurrence %s put twice", o.id)
		}
		if o.at.After(killedAt) && !o.at.After(recovered) {
			missed++
		}
		if o.at.After(deletedAt) {
			t.Errorf("occurrence %s after the schedule was deleted at %v", o.id, deletedAt)
		}
	}
	if missed != 1 {
		t.Errorf("%d occurrences from the downtime (after the kill at %v, up to the recovery at %v) were put; want the newest only", missed, killedAt, recovered)
	}
	t.Logf("%d occurrences, %d of them from the downtime", len(seen), missed)
}
