package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
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

	asked := time.Now()
	sched, err := c.SetSchedule(ctx, "tick", api.ScheduleRequest{Cron: "@every 1s", Queue: "ticks", Payload: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatalf("SetSchedule: %v", err)
	}
	// Within a second of when the server set it: after it was asked, by
	// the second, and no later than a second after the answer (a loaded
	// machine may take a while to answer).
	if answered := time.Now(); sched.Next.Before(asked.Truncate(time.Second)) || sched.Next.After(answered.Add(1100*time.Millisecond)) {
		t.Errorf("next occurrence of @every 1s is %v, asked at %v and answered at %v", sched.Next, asked, answered)
	}
	// Replacing it keeps one schedule.
	if _, err := c.SetSchedule(ctx, "tick", api.ScheduleRequest{Cron: "@every 1s", Queue: "ticks", Payload: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatalf("SetSchedule again: %v", err)
	}
	// An occurrence due before the replacement was answered may have been
	// put with the first payload (on a loaded machine the two calls can
	// straddle the first occurrence); none due after it.
	replaced := time.Now()

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
				case string(task.Payload) != `{"n":2}` && !(string(task.Payload) == `{"n":1}` && !at.After(replaced)):
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
	// Occurrences due before the new process listened were surely
	// missed; one due between that and "recovered" may be put as the
	// newest missed one or as it falls due: a cluster node takes its
	// schedules up with its partitions, before it logs "recovered".
	listening := s.logTime("listening")
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
	missed, down := 0, 0
	for _, o := range seen {
		ids[o.id]++
		if ids[o.id] == 2 {
			t.Errorf("occurrence %s put twice", o.id)
		}
		if o.at.After(killedAt) && !o.at.After(listening) {
			down++
		}
		if o.at.After(killedAt) && !o.at.After(recovered) {
			missed++
		}
		if o.at.After(deletedAt) {
			t.Errorf("occurrence %s after the schedule was deleted at %v", o.id, deletedAt)
		}
	}
	if down > 1 || missed < 1 || missed-down > 1 {
		t.Errorf("%d occurrences from the downtime (after the kill at %v, up to the restart listening at %v) and %d up to the recovery at %v were put; want the newest missed only, and at most one due while it recovered",
			down, killedAt, listening, missed, recovered)
	}
	t.Logf("%d occurrences, %d of them from the downtime", len(seen), missed)
}

// occurrenceTimes returns the occurrence times of the tasks of queue put
// by schedule name (ids NAME@TIME; runs left out), whatever their state.
func occurrenceTimes(t *testing.T, c *client.Client, queue, name string) []time.Time {
	t.Helper()
	tasks, _, err := c.ListTasks(context.Background(), queue, "", "", 1000)
	if err != nil {
		t.Fatalf("ListTasks %s: %v", queue, err)
	}
	var out []time.Time
	for _, task := range tasks {
		n, ts, _ := strings.Cut(task.ID, "@")
		if at, err := time.Parse(time.RFC3339, ts); n == name && err == nil {
			out = append(out, at)
		}
	}
	return out
}

// countIn counts the times after from and not after to.
func countIn(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, at := range ts {
		if at.After(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// TestSchedule_Misfire stops the server under three "@every 1s"
// schedules, one per misfire rule, lets some four occurrences pass, and
// checks what the restart put of them: none (skip), the newest (one),
// every one (all, within its catch-up).
func TestSchedule_Misfire(t *testing.T) { engines(t, testScheduleMisfire) }

func testScheduleMisfire(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for _, rule := range []string{"skip", "one", "all"} {
		if _, err := c.SetSchedule(ctx, "m-"+rule, api.ScheduleRequest{Cron: "@every 1s", Queue: "misfire-" + rule, Misfire: rule}); err != nil {
			t.Fatalf("SetSchedule %s: %v", rule, err)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	s.stop()
	stopped := time.Now()
	time.Sleep(4200 * time.Millisecond)
	s.start()
	// Every occurrence up to listening was missed; when the restarted
	// server took the schedules up (recovery, a cluster's first lease
	// tick) is not logged to the second, so the rules are told apart by
	// the seconds after the stop with no occurrence.
	listening := s.logTime("listening")
	s.logTime("hourglass: recovered")
	time.Sleep(2500 * time.Millisecond)
	after := func(name string) (upToListening, missing int) {
		ts := occurrenceTimes(t, c, "misfire-"+name, "m-"+name)
		var last time.Time
		n := 0
		for _, at := range ts {
			if at.After(stopped) {
				n++
				if at.After(last) {
					last = at
				}
			}
		}
		first := stopped.Truncate(time.Second).Add(time.Second)
		return countIn(ts, stopped, listening), int(last.Sub(first)/time.Second) + 1 - n
	}
	skipUp, skipMissing := after("skip")
	oneUp, oneMissing := after("one")
	allUp, allMissing := after("all")
	t.Logf("up to listening / seconds with no occurrence since the stop: skip %d/%d, one %d/%d, all %d/%d",
		skipUp, skipMissing, oneUp, oneMissing, allUp, allMissing)
	if skipUp != 0 || skipMissing < 3 {
		t.Errorf("misfire skip: %d occurrences of the downtime put, %d seconds without; want 0 and 3 or more", skipUp, skipMissing)
	}
	if oneUp > 1 || oneMissing < 3 {
		t.Errorf("misfire one: %d occurrences of the downtime put, %d seconds without; want at most 1 and 3 or more", oneUp, oneMissing)
	}
	if allUp < 3 || allMissing != 0 {
		t.Errorf("misfire all: %d occurrences of the downtime put, %d seconds without; want 3 or more and none", allUp, allMissing)
	}
	// Each goes on after the restart.
	for _, rule := range []string{"skip", "one", "all"} {
		sc, err := c.Schedule(ctx, "m-"+rule)
		if err != nil || sc.Misfire != rule || sc.Last == nil || sc.Last.Outcome != "pending" {
			t.Errorf("Schedule m-%s: %+v %+v, %v", rule, sc, sc.Last, err)
		}
	}
}

// TestSchedule_Overlap: an "@every 1s" schedule with overlap skip puts
// nothing while its task waits unreserved (the occurrences are skipped and
// the last shows it), and puts again once that task is acked.
func TestSchedule_Overlap(t *testing.T) { engines(t, testScheduleOverlap) }

func testScheduleOverlap(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, err := c.SetSchedule(ctx, "ov", api.ScheduleRequest{Cron: "@every 1s", Queue: "overlap", Overlap: "skip"}); err != nil {
		t.Fatalf("SetSchedule: %v", err)
	}
	time.Sleep(3500 * time.Millisecond)
	if n := len(occurrenceTimes(t, c, "overlap", "ov")); n != 1 {
		t.Fatalf("%d tasks after 3.5 s of overlap skip, want 1", n)
	}
	sc, err := c.Schedule(ctx, "ov")
	if err != nil || sc.Overlap != "skip" || sc.Last == nil || sc.Last.Outcome != "skipped" || sc.Last.TaskID != "" {
		t.Fatalf("Schedule: %+v %+v, %v; want the last skipped", sc, sc.Last, err)
	}
	r := reserveOnce(c, "overlap", time.Second)
	if r.err != nil || len(r.tasks) != 1 {
		t.Fatalf("reserve: %v, %v", r.tasks, r.err)
	}
	if err := c.Ack(ctx, "overlap", r.tasks[0].ID, r.tasks[0].Lease); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		sc, err := c.Schedule(ctx, "ov")
		if err == nil && sc.Last != nil && sc.Last.Outcome == "pending" && sc.Last.TaskID != r.tasks[0].ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no occurrence put after the ack: %+v %+v, %v", sc, sc.Last, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSchedule_RunNow: run puts a task now with the schedule's payload
// and priority, id NAME@run-MS, which becomes the last, pending, then
// acked once acked; the next occurrence stays.
func TestSchedule_RunNow(t *testing.T) { engines(t, testScheduleRunNow) }

func testScheduleRunNow(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	prio := uint32(7)
	set, err := c.SetSchedule(ctx, "yearly", api.ScheduleRequest{Cron: "0 0 1 1 *", Queue: "runs", Payload: json.RawMessage(`{"x":1}`), Priority: &prio})
	if err != nil {
		t.Fatalf("SetSchedule: %v", err)
	}
	task, err := c.RunSchedule(ctx, "yearly")
	if err != nil || !strings.HasPrefix(task.ID, "yearly@run-") || string(task.Payload) != `{"x":1}` || task.Priority != 7 {
		t.Fatalf("RunSchedule: %+v, %v", task, err)
	}
	sc, err := c.Schedule(ctx, "yearly")
	if err != nil || sc.Last == nil || sc.Last.TaskID != task.ID || sc.Last.Outcome != "pending" || !sc.Next.Equal(set.Next) {
		t.Fatalf("Schedule after run: %+v %+v, %v", sc, sc.Last, err)
	}
	r := reserveOnce(c, "runs", time.Second)
	if r.err != nil || len(r.tasks) != 1 || r.tasks[0].ID != task.ID {
		t.Fatalf("reserve: %v, %v", r.tasks, r.err)
	}
	if err := c.Ack(ctx, "runs", task.ID, r.tasks[0].Lease); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if sc, err := c.Schedule(ctx, "yearly"); err != nil || sc.Last == nil || sc.Last.Outcome != "acked" {
		t.Errorf("Schedule after the ack: %+v %+v, %v", sc, sc.Last, err)
	}
	if a := s.call("POST", "/v1/schedules/none/run", "{}"); a.status != 404 {
		t.Errorf("run of no schedule: %v", a)
	}
}

// TestSchedule_PauseResume: a paused "@every 1s" schedule puts nothing,
// across a restart too, and a resume starts from now, with no catch-up.
func TestSchedule_PauseResume(t *testing.T) { engines(t, testSchedulePauseResume) }

func testSchedulePauseResume(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, err := c.SetSchedule(ctx, "pz", api.ScheduleRequest{Cron: "@every 1s", Queue: "paused", Misfire: "all"}); err != nil {
		t.Fatalf("SetSchedule: %v", err)
	}
	if err := c.PauseSchedule(ctx, "pz"); err != nil {
		t.Fatalf("PauseSchedule: %v", err)
	}
	paused := time.Now()
	s.stop()
	time.Sleep(1500 * time.Millisecond)
	s.start()
	time.Sleep(1500 * time.Millisecond)
	if n := countIn(occurrenceTimes(t, c, "paused", "pz"), paused, time.Now()); n != 0 {
		t.Fatalf("%d occurrences put while paused", n)
	}
	sc, err := c.Schedule(ctx, "pz")
	if err != nil || !sc.Paused || !sc.Next.IsZero() {
		t.Fatalf("Schedule after the restart: %+v, %v; want paused, no next", sc, err)
	}
	resumed := time.Now()
	if err := c.ResumeSchedule(ctx, "pz"); err != nil {
		t.Fatalf("ResumeSchedule: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for countIn(occurrenceTimes(t, c, "paused", "pz"), resumed, time.Now().Add(time.Hour)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing put within 5 s of the resume")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := countIn(occurrenceTimes(t, c, "paused", "pz"), paused, resumed.Add(-time.Second)); n != 0 {
		t.Errorf("%d occurrences of the pause put after the resume, want none (no catch-up)", n)
	}
	if a := s.call("POST", "/v1/schedules/none/pause", "{}"); a.status != 404 {
		t.Errorf("pause of no schedule: %v", a)
	}
}

// TestSchedule_BadFields: each bad field is 400 naming it, and nothing
// is created.
func TestSchedule_BadFields(t *testing.T) { engines(t, testScheduleBadFields) }

func testScheduleBadFields(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for field, body := range map[string]string{
		"misfire":      `{"cron":"@every 1s","queue":"q","misfire":"most"}`,
		"overlap":      `{"cron":"@every 1s","queue":"q","overlap":"never"}`,
		"catch_up":     `{"cron":"@every 1s","queue":"q","catch_up":"-1s"}`,
		"ttr":          `{"cron":"@every 1s","queue":"q","ttr":"25h"}`,
		"max_attempts": `{"cron":"@every 1s","queue":"q","max_attempts":-2}`,
		"priority":     `{"cron":"@every 1s","queue":"q","priority":-1}`,
		"paused":       `{"cron":"@every 1s","queue":"q","paused":"yes"}`,
	} {
		a := s.call("PUT", "/v1/schedules/bad", body)
		if a.status != 400 || !strings.Contains(string(a.body), field) {
			t.Errorf("bad %s: %v; want 400 naming it", field, a)
		}
	}
	if a := s.call("GET", "/v1/schedules/bad", ""); a.status != 404 {
		t.Errorf("after the bad puts: %v; want 404", a)
	}
}
