package e2e_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/api"
	"github.com/hourglass-go/hourglass/client"
)

// The history's black-box tests: a task's attempts (GET
// .../tasks/{id}/attempts) and the tasks that left a queue (GET
// .../history), on both engines, across a SIGKILL, with --history 0, and
// through the CLI.

// TestHistory_Attempts takes a task through a nack, a lease that runs out
// and an ack, and checks its attempts after each: numbered from 1, each
// with its outcome and error, its start and end in order, a running one
// without end or outcome; after the ack they are still answered, from
// the history. An unknown task is 404.
func TestHistory_Attempts(t *testing.T) { engines(t, testHistoryAttempts) }

func testHistoryAttempts(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	const ttr = 400 * time.Millisecond
	if _, _, err := c.Put(ctx, "ha", api.PutRequest{ID: "a", TTR: new(api.Duration(ttr))}); err != nil {
		t.Fatal(err)
	}
	if as, err := c.Attempts(ctx, "ha", "a"); err != nil || len(as) != 0 {
		t.Fatalf("attempts of a task never reserved: %+v, %v; want none", as, err)
	}
	// ended checks an ended attempt's outcome and error, and its times:
	// started and ended within [from, to] (give or take the engine's
	// clock), in order, and its duration theirs.
	ended := func(a api.Attempt, n int, outcome, errText string, from, to time.Time) {
		t.Helper()
		slack := clockSlack(t)
		if a.Attempt != n || a.Outcome != outcome || a.Error != errText || a.Ended == nil {
			t.Errorf("attempt %d: %+v; want %s with error %q, ended", n, a, outcome, errText)
			return
		}
		if a.Started.Before(from.Add(-slack)) || a.Ended.After(to.Add(slack)) || a.Ended.Before(a.Started) ||
			a.Duration.D() != a.Ended.Sub(a.Started) || a.Started.Location() != time.UTC || a.Ended.Location() != time.UTC {
			t.Errorf("attempt %d: started %v, ended %v, lasted %v; want from %v to %v in UTC, lasting ended−started", n, a.Started, a.Ended, a.Duration, from, to)
		}
		if engineOf(t) == clusterEngine && a.Node != "n1" {
			t.Errorf("attempt %d on the cluster: node %q, want the node that ended it, n1", n, a.Node)
		}
		if engineOf(t) == embeddedEngine && a.Node != "" {
			t.Errorf("attempt %d on the embedded engine: node %q, want none", n, a.Node)
		}
	}

	// Attempt 1: nacked with an error.
	t0 := time.Now()
	r1 := reserveOne(t, c, "ha", time.Second)
	as, err := c.Attempts(ctx, "ha", "a")
	if err != nil || len(as) != 1 || as[0].Attempt != 1 || as[0].Ended != nil || as[0].Outcome != "" ||
		as[0].Started.Before(t0.Add(-clockSlack(t))) || as[0].Duration.D() < 0 || as[0].Duration.D() > time.Minute {
		t.Fatalf("attempts while reserved: %+v, %v; want attempt 1 running, started after %v", as, err, t0)
	}
	// On the wire a running attempt has neither "ended" nor "outcome".
	raw := s.call("GET", "/v1/queues/ha/tasks/a/attempts", "")
	if raw.status != 200 || strings.Contains(string(raw.body), `"ended"`) || strings.Contains(string(raw.body), `"outcome"`) ||
		!strings.Contains(string(raw.body), `"duration":"`) {
		t.Errorf("GET attempts while reserved: %v; want a running attempt without ended or outcome, with its duration so far", raw)
	}
	if _, err := c.Nack(ctx, "ha", "a", r1.Lease, 0, "smtp: timeout"); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()

	// Attempt 2: its lease runs out. Attempt 3 is the reservation after.
	r2 := reserveOne(t, c, "ha", time.Second)
	if r2.Attempts != 2 {
		t.Fatalf("second reservation: %+v", r2)
	}
	r3 := reserveOne(t, c, "ha", 10*time.Second)
	t2 := time.Now()
	if r3.Attempts != 3 {
		t.Fatalf("reservation after the lease ran out: %+v", r3)
	}
	as, err = c.Attempts(ctx, "ha", "a")
	if err != nil || len(as) != 3 {
		t.Fatalf("attempts after a nack and an expiry: %+v, %v; want 3", as, err)
	}
	ended(as[0], 1, api.AttemptNacked, "smtp: timeout", t0, t1)
	ended(as[1], 2, api.AttemptExpired, "lease expired", t1, t2)
	if d := as[1].Duration.D(); d < ttr-clockSlack(t) {
		t.Errorf("expired attempt lasted %v, less than its ttr %v", d, ttr)
	}
	if a := as[2]; a.Attempt != 3 || a.Ended != nil || a.Outcome != "" || a.Started.Before(as[1].Started) {
		t.Errorf("attempt 3: %+v; want running, started after attempt 2", a)
	}

	// Attempt 3: acked. The task is gone; its attempts are answered from
	// the history.
	if err := c.Ack(ctx, "ha", "a", r3.Lease); err != nil {
		t.Fatal(err)
	}
	t3 := time.Now()
	as, err = c.Attempts(ctx, "ha", "a")
	if err != nil || len(as) != 3 {
		t.Fatalf("attempts after the ack: %+v, %v; want 3", as, err)
	}
	ended(as[0], 1, api.AttemptNacked, "smtp: timeout", t0, t1)
	ended(as[1], 2, api.AttemptExpired, "lease expired", t1, t2)
	ended(as[2], 3, api.AttemptAcked, "", t1, t3)
	if !as[2].Started.After(as[1].Started) || as[2].Started.Before(*as[1].Ended) {
		t.Errorf("attempt 3 started at %v, attempt 2 ran from %v to %v", as[2].Started, as[1].Started, as[1].Ended)
	}

	// Unknown: a task, a queue.
	for _, p := range [][2]string{{"ha", "never"}, {"nowhere", "a"}} {
		if as, err := c.Attempts(ctx, p[0], p[1]); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("attempts of %s in %s: %+v, %v; want ErrNotFound", p[1], p[0], as, err)
		}
	}
	if raw := s.call("GET", "/v1/queues/ha/tasks/bad%20id/attempts", ""); raw.status != 400 {
		t.Errorf("attempts of a bad id: %v, want 400", raw)
	}
}

// finishedLine is what the tests compare of a FinishedTask: everything
// but its time.
func finishedLine(f api.FinishedTask) string {
	return fmt.Sprintf("%s %s attempts=%d error=%q", f.ID, f.Outcome, f.Attempts, f.LastError)
}

// historyLines returns the whole history of queue (outcome "" for any),
// page by page of limit, as finishedLines, checking that the pages come
// newest first, that each task has a job id, and that a page shorter
// than limit is the last (next 0).
func historyLines(t *testing.T, c *client.Client, queue, outcome string, limit int) []string {
	t.Helper()
	var (
		lines []string
		after uint64
		last  time.Time
	)
	for page := 0; ; page++ {
		fs, next, err := c.History(context.Background(), queue, outcome, after, limit)
		if err != nil {
			t.Fatalf("history of %s (outcome %q, after %d, limit %d): %v", queue, outcome, after, limit, err)
		}
		for _, f := range fs {
			if f.JobID == 0 || f.Finished.IsZero() || f.Finished.Location() != time.UTC || !last.IsZero() && f.Finished.After(last) {
				t.Errorf("history of %s: %+v after a task finished at %v; want newest first, in UTC, with a job id", queue, f, last)
			}
			last = f.Finished
			lines = append(lines, finishedLine(f))
		}
		if len(fs) < limit && next != 0 {
			t.Errorf("history of %s: a page of %d (limit %d) with next %d; want 0 on the last page", queue, len(fs), limit, next)
		}
		if next == 0 {
			return lines
		}
		if next == after || page > 100 {
			t.Fatalf("history of %s: next %d after %d: no progress", queue, next, after)
		}
		after = next
	}
}

// TestHistory_List finishes tasks of a queue every way (acked, dead by a
// nack of its last attempt, buried, deleted while ready, deleted while
// dead, and dead into a dead-letter queue) and checks the queue's
// history: newest first, each outcome with its attempts and last error,
// the same page by page, filtered by outcome; bad queries are 400.
func TestHistory_List(t *testing.T) { engines(t, testHistoryList) }

func testHistoryList(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	put := func(queue, id string, maxAttempts int) {
		t.Helper()
		if _, _, err := c.Put(ctx, queue, api.PutRequest{ID: id, MaxAttempts: maxAttempts}); err != nil {
			t.Fatal(err)
		}
	}
	if fs, next, err := c.History(ctx, "hl", "", 0, 0); err != nil || len(fs) != 0 || next != 0 {
		t.Fatalf("history of a new queue: %+v, %d, %v", fs, next, err)
	}

	put("hl", "acked", 0)
	tk := reserveOne(t, c, "hl", time.Second)
	if err := c.Ack(ctx, "hl", tk.ID, tk.Lease); err != nil {
		t.Fatal(err)
	}
	put("hl", "dead", 1)
	tk = reserveOne(t, c, "hl", time.Second)
	if got, err := c.Nack(ctx, "hl", tk.ID, tk.Lease, 0, "fatal"); err != nil || got.State != api.StateDead {
		t.Fatalf("nack of the last attempt: %+v, %v", got, err)
	}
	put("hl", "deleted", 0)
	if err := c.Delete(ctx, "hl", "deleted"); err != nil {
		t.Fatal(err)
	}
	put("hl", "buried", 0)
	tk = reserveOne(t, c, "hl", time.Second)
	if _, err := c.Bury(ctx, "hl", tk.ID, tk.Lease, "bad input"); err != nil {
		t.Fatal(err)
	}
	// The dead task leaves its queue again: deleted.
	if err := c.Delete(ctx, "hl", "dead"); err != nil {
		t.Fatal(err)
	}
	// Twice acked under one id: two tasks, two lines.
	for range 2 {
		put("hl", "again", 0)
		tk = reserveOne(t, c, "hl", time.Second)
		if err := c.Ack(ctx, "hl", tk.ID, tk.Lease); err != nil {
			t.Fatal(err)
		}
	}

	want := []string{
		`again acked attempts=1 error=""`,
		`again acked attempts=1 error=""`,
		`dead deleted attempts=1 error="fatal"`,
		`buried dead attempts=1 error="bad input"`,
		`deleted deleted attempts=0 error=""`,
		`dead dead attempts=1 error="fatal"`,
		`acked acked attempts=1 error=""`,
	}
	for _, limit := range []int{api.MaxListLimit, 1, 2, 3, 7} {
		if got := historyLines(t, c, "hl", "", limit); !slices.Equal(got, want) {
			t.Errorf("history by pages of %d:\n got %q\nwant %q", limit, got, want)
		}
	}
	for outcome, want := range map[string][]string{
		api.FinishedAcked:   {want[0], want[1], want[6]},
		api.FinishedDead:    {want[3], want[5]},
		api.FinishedDeleted: {want[2], want[4]},
	} {
		for _, limit := range []int{1, 100} {
			if got := historyLines(t, c, "hl", outcome, limit); !slices.Equal(got, want) {
				t.Errorf("history of outcome %s by pages of %d:\n got %q\nwant %q", outcome, limit, got, want)
			}
		}
	}
	// The two tasks of one id are two jobs; the id's attempts are the
	// newest's.
	fs, _, err := c.History(ctx, "hl", api.FinishedAcked, 0, 2)
	if err != nil || len(fs) != 2 || fs[0].JobID == fs[1].JobID || fs[0].JobID < fs[1].JobID {
		t.Errorf("the two tasks of id again: %+v, %v; want two jobs, the newer first", fs, err)
	}
	// A task deleted before any reservation has no attempts, and is known.
	if as, err := c.Attempts(ctx, "hl", "deleted"); err != nil || len(as) != 0 {
		t.Errorf("attempts of a task deleted while ready: %+v, %v; want none", as, err)
	}
	if as, err := c.Attempts(ctx, "hl", "buried"); err != nil || len(as) != 1 || as[0].Outcome != api.AttemptBuried || as[0].Error != "bad input" {
		t.Errorf("attempts of the buried task: %+v, %v", as, err)
	}

	// A dead-letter move: dead in the queue it left, live in the other.
	if _, err := c.SetPolicy(ctx, "hd", api.Policy{MaxAttempts: 2, DeadLetter: "hd-dead"}); err != nil {
		t.Fatal(err)
	}
	put("hd", "m", 0)
	for i := range 2 {
		tk = reserveOne(t, c, "hd", time.Second)
		if _, err := c.Nack(ctx, "hd", tk.ID, tk.Lease, 0, fmt.Sprint("err ", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.Get(ctx, "hd-dead", "m"); err != nil || got.State != api.StateReady || got.Attempts != 0 || got.MaxAttempts != 25 {
		t.Fatalf("the task in the dead-letter queue: %+v, %v; want ready, attempts 0 of the default 25", got, err)
	}
	if got := historyLines(t, c, "hd", "", 10); !slices.Equal(got, []string{`m dead attempts=2 error="err 2"`}) {
		t.Errorf("history of the queue a task left for its dead-letter queue: %q", got)
	}
	if got := historyLines(t, c, "hd-dead", "", 10); len(got) != 0 {
		t.Errorf("history of the dead-letter queue, where the task lives: %q; want none", got)
	}
	if as, err := c.Attempts(ctx, "hd", "m"); err != nil || len(as) != 2 || as[1].Outcome != api.AttemptNacked || as[1].Error != "err 2" {
		t.Errorf("attempts of the dead-lettered task in the queue it left: %+v, %v", as, err)
	}
	tk = reserveOne(t, c, "hd-dead", time.Second)
	if _, err := c.Nack(ctx, "hd-dead", "m", tk.Lease, 0, "err 3"); err != nil {
		t.Fatal(err)
	}
	if as, err := c.Attempts(ctx, "hd-dead", "m"); err != nil || len(as) != 3 ||
		as[0].Attempt != 1 || as[0].Queue != "hd" || as[1].Attempt != 2 || as[1].Queue != "hd" ||
		as[2].Attempt != 1 || as[2].Queue != "hd-dead" || as[2].Error != "err 3" {
		t.Errorf("attempts of the dead-lettered task, before and after the move: %+v, %v", as, err)
	}

	// Bad queries: 400 naming what is wrong.
	for q, names := range map[string]string{
		"outcome=done":   "outcome",
		"outcome=nacked": "outcome",
		"limit=0":        "limit",
		"limit=1001":     "limit",
		"after=-3":       "after",
	} {
		if a := s.call("GET", "/v1/queues/hl/history?"+q, ""); a.status != 400 || !strings.Contains(string(a.body), names) {
			t.Errorf("history?%s: %v; want 400 naming %s", q, a, names)
		}
	}
	if a := s.call("GET", "/v1/queues/bad%20queue/history", ""); a.status != 400 {
		t.Errorf("history of a bad queue name: %v; want 400", a)
	}
}

// TestHistory_Kill checks that the history survives SIGKILL: what a
// queue's history and a task's attempts answered before the kill (each
// answered ack, nack and delete durable) they answer after the restart,
// and a lease that ran out while the server was down is an expired
// attempt.
func TestHistory_Kill(t *testing.T) { engines(t, testHistoryKill) }

func testHistoryKill(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for i := range 6 {
		if _, _, err := c.Put(ctx, "hk", api.PutRequest{ID: fmt.Sprint("t", i), MaxAttempts: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		tk := reserveOne(t, c, "hk", time.Second)
		var err error
		switch i % 3 {
		case 0:
			err = c.Ack(ctx, "hk", tk.ID, tk.Lease)
		case 1:
			_, err = c.Nack(ctx, "hk", tk.ID, tk.Lease, time.Hour, "later")
		case 2:
			err = c.Delete(ctx, "hk", tk.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Put(ctx, "hk", api.PutRequest{ID: "leased", TTR: new(api.Duration(300 * time.Millisecond))}); err != nil {
		t.Fatal(err)
	}
	reserveOne(t, c, "hk", time.Second)

	snapshot := func() (history []api.FinishedTask, attempts map[string][]api.Attempt) {
		t.Helper()
		history, _, err := c.History(ctx, "hk", "", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		attempts = map[string][]api.Attempt{}
		for i := range 6 {
			id := fmt.Sprint("t", i)
			as, err := c.Attempts(ctx, "hk", id)
			if err != nil {
				t.Fatalf("attempts of %s: %v", id, err)
			}
			attempts[id] = as
		}
		return history, attempts
	}
	history, attempts := snapshot()
	if len(history) != 4 {
		t.Fatalf("history before the kill: %+v; want 2 acked and 2 deleted", history)
	}

	s.kill()
	time.Sleep(500 * time.Millisecond)
	s.start()

	history2, attempts2 := snapshot()
	if !jsonEqual(history, history2) {
		t.Errorf("history after SIGKILL:\n got %s\nwant %s", jsonText(history2), jsonText(history))
	}
	if !jsonEqual(attempts, attempts2) {
		t.Errorf("attempts after SIGKILL:\n got %s\nwant %s", jsonText(attempts2), jsonText(attempts))
	}
	// The lease ran out while the server was down.
	deadline := time.Now().Add(10 * time.Second)
	for {
		as, err := c.Attempts(ctx, "hk", "leased")
		if err == nil && len(as) == 1 && as[0].Outcome == api.AttemptExpired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempts of a task whose lease ran out while the server was down: %+v, %v; want one, expired", as, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jsonText returns v in JSON, for comparisons and messages.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// jsonEqual reports whether a and b are the same in JSON.
func jsonEqual(a, b any) bool { return jsonText(a) == jsonText(b) }

// TestHistory_KeepNone checks `hourglass serve --history 0`: no queue
// has a history and a finished task no attempts (404), while a live
// task's running attempt still shows.
func TestHistory_KeepNone(t *testing.T) { engines(t, testHistoryKeepNone) }

func testHistoryKeepNone(t *testing.T) {
	t.Parallel()
	s := startServer(t, withFlags("--history", "0"))
	c := s.client()
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if _, _, err := c.Put(ctx, "hn", api.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	tk := reserveOne(t, c, "hn", time.Second)
	if _, err := c.Nack(ctx, "hn", tk.ID, tk.Lease, time.Hour, "later"); err != nil {
		t.Fatal(err)
	}
	tk = reserveOne(t, c, "hn", time.Second)
	if as, err := c.Attempts(ctx, "hn", tk.ID); err != nil || len(as) != 1 || as[0].Ended != nil {
		t.Errorf("attempts of a reserved task: %+v, %v; want its running attempt only", as, err)
	}
	if err := c.Ack(ctx, "hn", tk.ID, tk.Lease); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "hn", "a"); err != nil {
		t.Fatal(err)
	}
	if fs, next, err := c.History(ctx, "hn", "", 0, 0); err != nil || len(fs) != 0 || next != 0 {
		t.Errorf("history with --history 0: %+v, %d, %v; want none", fs, next, err)
	}
	for _, id := range []string{"a", "b"} {
		if as, err := c.Attempts(ctx, "hn", id); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("attempts of finished task %s with --history 0: %+v, %v; want ErrNotFound", id, as, err)
		}
	}
}

// TestHistory_Retention checks `hourglass serve --history 3s`: a
// finished task is in the history at first, and gone from it, with its
// attempts, a few seconds later (the engines prune a short retention
// every quarter of it); a live task's attempts stay.
func TestHistory_Retention(t *testing.T) { engines(t, testHistoryRetention) }

func testHistoryRetention(t *testing.T) {
	t.Parallel()
	s := startServer(t, withFlags("--history", "3s"))
	c := s.client()
	ctx := context.Background()
	for _, id := range []string{"live", "done"} {
		if _, _, err := c.Put(ctx, "ht", api.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"live", "done"} {
		tk := reserveOne(t, c, "ht", time.Second)
		var err error
		if id == "done" {
			err = c.Ack(ctx, "ht", tk.ID, tk.Lease)
		} else {
			_, err = c.Nack(ctx, "ht", tk.ID, tk.Lease, time.Hour, "later")
		}
		if err != nil || tk.ID != id {
			t.Fatalf("%s: reserved %s, %v", id, tk.ID, err)
		}
	}
	if fs, _, err := c.History(ctx, "ht", "", 0, 0); err != nil || len(fs) != 1 {
		t.Fatalf("history at first: %+v, %v; want the acked task", fs, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		fs, _, err := c.History(ctx, "ht", "", 0, 0)
		_, aerr := c.Attempts(ctx, "ht", "done")
		if err == nil && len(fs) == 0 && errors.Is(aerr, client.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history 20s after a task finished, kept 3s: %+v, %v; its attempts: %v", fs, err, aerr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The live task's ended attempt is kept while it lives.
	if as, err := c.Attempts(ctx, "ht", "live"); err != nil || len(as) != 1 || as[0].Outcome != api.AttemptNacked {
		t.Errorf("attempts of a live task after the prune: %+v, %v; want its nacked attempt", as, err)
	}
}

// TestCLI_History drives `hourglass attempts` and `hourglass history`
// against a server: a line of JSON per attempt or task, history's last
// line its cursor, the filters and paging of the API, and usage and call
// errors.
func TestCLI_History(t *testing.T) { engines(t, testCLIHistory) }

func testCLIHistory(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	for _, id := range []string{"x", "y", "z"} {
		if _, _, err := c.Put(ctx, "hc", api.PutRequest{ID: id, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	tk := reserveOne(t, c, "hc", time.Second)
	if _, err := c.Nack(ctx, "hc", tk.ID, tk.Lease, 0, "no luck"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		tk = reserveOne(t, c, "hc", time.Second)
		if err := c.Ack(ctx, "hc", tk.ID, tk.Lease); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) ([]string, string, int) {
		t.Helper()
		out, stderr, code := s.cli(args...)
		return strings.Split(strings.TrimSpace(out), "\n"), stderr, code
	}

	lines, stderr, code := cli("attempts", "hc", "x")
	var a api.Attempt
	if code != 0 || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &a) != nil || a.Attempt != 1 || a.Outcome != api.AttemptNacked || a.Error != "no luck" {
		t.Errorf("attempts hc x: %d %q %q", code, lines, stderr)
	}
	lines, stderr, code = cli("history", "hc")
	var f api.FinishedTask
	if code != 0 || len(lines) != 4 || lines[3] != `{"next":0}` || json.Unmarshal([]byte(lines[0]), &f) != nil || f.ID != "z" || f.Outcome != api.FinishedAcked {
		t.Errorf("history hc: %d %q %q", code, lines, stderr)
	}
	lines, stderr, code = cli("history", "hc", "--outcome", "dead")
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &f) != nil || f.ID != "x" || f.Outcome != api.FinishedDead || f.LastError != "no luck" {
		t.Errorf("history hc --outcome dead: %d %q %q", code, lines, stderr)
	}
	lines, stderr, code = cli("history", "hc", "--limit", "2")
	var next struct{ Next uint64 }
	if code != 0 || len(lines) != 3 || json.Unmarshal([]byte(lines[2]), &next) != nil || next.Next == 0 {
		t.Fatalf("history hc --limit 2: %d %q %q", code, lines, stderr)
	}
	lines, stderr, code = cli("history", "hc", "--limit", "2", "--after", fmt.Sprint(next.Next))
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &f) != nil || f.ID != "x" || lines[1] != `{"next":0}` {
		t.Errorf("history hc's second page: %d %q %q", code, lines, stderr)
	}

	if _, stderr, code = cli("attempts", "hc", "never"); code != 1 || !strings.HasPrefix(stderr, "hourglass: ") {
		t.Errorf("attempts of an unknown task: %d %q", code, stderr)
	}
	if _, stderr, code = cli("history", "hc", "--outcome", "gone"); code != 2 || !strings.Contains(stderr, "usage: hourglass history QUEUE") {
		t.Errorf("history --outcome gone: %d %q", code, stderr)
	}
	if _, stderr, code = cli("attempts", "hc"); code != 2 || !strings.Contains(stderr, "usage: hourglass attempts QUEUE ID") {
		t.Errorf("attempts without an id: %d %q", code, stderr)
	}
}

// TestHistory_Release checks that a released attempt stays in a task's
// attempts, as every outcome of the wire does, and that the attempts
// listed agree with the task's count (issue 44): a release gives the
// attempt back to the task's count (the next reservation is attempt 1
// again in its attempts field) and its number with it, so the attempt
// after it is numbered 1 too, the released one told apart by its
// outcome.
func TestHistory_Release(t *testing.T) { engines(t, testHistoryRelease) }

func testHistoryRelease(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.client()
	ctx := context.Background()
	if _, _, err := c.Put(ctx, "hr", api.PutRequest{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	tk := reserveOne(t, c, "hr", time.Second)
	if _, err := c.Release(ctx, "hr", "r", tk.Lease, 0); err != nil {
		t.Fatal(err)
	}
	tk = reserveOne(t, c, "hr", time.Second)
	if tk.Attempts != 1 {
		t.Errorf("reservation after a release: attempts %d, want 1 (the release gave it back)", tk.Attempts)
	}
	outcomes := func(as []api.Attempt) string {
		var s []string
		for _, a := range as {
			s = append(s, fmt.Sprintf("%d:%s", a.Attempt, cmp.Or(a.Outcome, "running")))
		}
		return strings.Join(s, " ")
	}
	if as, err := c.Attempts(ctx, "hr", "r"); err != nil || outcomes(as) != "1:released 1:running" {
		t.Errorf("attempts after a release, reserved again: %s (%v); want 1:released 1:running", outcomes(as), err)
	}
	if err := c.Ack(ctx, "hr", "r", tk.Lease); err != nil {
		t.Fatal(err)
	}
	if as, err := c.Attempts(ctx, "hr", "r"); err != nil || outcomes(as) != "1:released 1:acked" {
		t.Errorf("attempts after a release and an ack: %s (%v); want 1:released 1:acked", outcomes(as), err)
	}
	if fs, _, err := c.History(ctx, "hr", "", 0, 10); err != nil || len(fs) != 1 || fs[0].Attempts != 1 {
		t.Errorf("history: %+v, %v; want the task acked after 1 attempt (the release not counted)", fs, err)
	}
}
