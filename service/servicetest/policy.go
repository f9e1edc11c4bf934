package servicetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// RunPolicies runs the suite of queue policies (task.Policy and the
// rules of service/policy.go) over one service open returns, shared by
// its subtests, each on queues of its own: the policies' records, put
// defaults, nack and last errors, back-off and its jitter, lease expiry,
// release, bury, dead letters, pauses, the concurrency and rate limits
// (what frees a place, what spends a token), and a policy over the tasks
// queued before it.
//
// Timing checks are one-sided where it matters: a task never comes back,
// nor a pause ends, nor a token is handed out before its time (less
// timeSlack); the bounds on lateness are generous (lateSlack), since the
// suite also runs a node of a cluster on PostgreSQL on a loaded machine.
func RunPolicies(t *testing.T, open func(t *testing.T) service.Service) {
	b := open(t)
	t.Run("crud", func(t *testing.T) { policyCRUD(t, b) })
	t.Run("put-defaults", func(t *testing.T) { putDefaults(t, b) })
	t.Run("put-defaults-rule", func(t *testing.T) { putDefaultsRule(t, b) })
	t.Run("nack", func(t *testing.T) { nackPolicy(t, b) })
	t.Run("answers", func(t *testing.T) { failureAnswers(t, b) })
	t.Run("backoff", func(t *testing.T) { backoff(t, b) })
	t.Run("jitter", func(t *testing.T) { jitter(t, b) })
	t.Run("lease-expiry", func(t *testing.T) { leaseExpiry(t, b) })
	t.Run("lease-expiry-default", func(t *testing.T) { leaseExpiryDefault(t, b) })
	t.Run("lease-expiry-keeps-place", func(t *testing.T) { leaseExpiryKeepsPlace(t, b) })
	t.Run("lease-expiry-bound", func(t *testing.T) { leaseExpiryBound(t, b) })
	t.Run("release", func(t *testing.T) { release(t, b) })
	t.Run("bury", func(t *testing.T) { bury(t, b) })
	t.Run("dead-order", func(t *testing.T) { deadOrder(t, b) })
	t.Run("job-order", func(t *testing.T) { jobOrder(t, b) })
	t.Run("dead-letter", func(t *testing.T) { deadLetter(t, b) })
	t.Run("dead-letter-due", func(t *testing.T) { deadLetterDue(t, b) })
	t.Run("dead-letter-limits", func(t *testing.T) { deadLetterLimits(t, b) })
	t.Run("dead-letter-attempts", func(t *testing.T) { deadLetterAttempts(t, b) })
	t.Run("pause", func(t *testing.T) { pause(t, b) })
	t.Run("pause-wakes", func(t *testing.T) { pauseWakes(t, b) })
	t.Run("pause-and-policy", func(t *testing.T) { pauseAndPolicy(t, b) })
	t.Run("concurrency", func(t *testing.T) { concurrency(t, b) })
	t.Run("concurrency-freed", func(t *testing.T) { concurrencyFreed(t, b) })
	t.Run("rate", func(t *testing.T) { rate(t, b) })
	t.Run("rate-tokens", func(t *testing.T) { rateTokens(t, b) })
	t.Run("existing-tasks", func(t *testing.T) { existingTasks(t, b) })
}

const (
	// timeSlack is how early a time an engine reports may seem: the
	// cluster keeps times at PostgreSQL's microsecond precision.
	timeSlack = time.Millisecond
	// lateSlack bounds how late a delayed task, a pause's end or a token
	// may come: generous, for a cluster node on a loaded machine.
	lateSlack = 2 * time.Second
	// dueSlack bounds how much later than the call's end a time an engine
	// computes in the call (a due time, a lease's or a pause's end) may
	// be: a cluster node reads the database's clock through an offset.
	dueSlack = 10 * time.Millisecond
)

// sinceEither is the time since start on the wall clock or on the
// monotonic clock, whichever moved more. A rate limit's tokens accrue on
// one of them (the embedded engine's on the monotonic clock, a cluster's
// on the database's wall clock): bounds on what it hands out read the
// one that could allow more, so a step of the machine's wall clock
// during a test is not taken for tokens handed out early.
func sinceEither(start time.Time) time.Duration {
	return max(time.Since(start), time.Now().Round(0).Sub(start.Round(0)))
}

// putTask puts r into queue on b and fails t on an error.
func putTask(t *testing.T, b service.Service, queue string, r task.PutRequest) task.Task {
	t.Helper()
	tk, _, err := b.Put(context.Background(), queue, r)
	must(t, "put into "+queue, err)
	return tk
}

// queueStats returns queue's entry of b.Queues(), and whether it is
// listed.
func queueStats(t *testing.T, b service.Service, queue string) (task.QueueStats, bool) {
	t.Helper()
	qs, err := b.Queues(context.Background())
	must(t, "queues", err)
	for _, s := range qs {
		if s.Name == queue {
			return s, true
		}
	}
	return task.QueueStats{}, false
}

// setPolicy sets queue's policy on b and fails t on an error.
func setPolicy(t *testing.T, b service.Service, queue string, p task.Policy) task.Policy {
	t.Helper()
	got, err := b.SetPolicy(context.Background(), queue, p)
	must(t, "set the policy of "+queue, err)
	return got
}

// reserveNone fails t if a reserve of queue waiting wait hands out a
// task.
func reserveNone(t *testing.T, b service.Service, queue string, wait time.Duration) {
	t.Helper()
	ts, err := b.Reserve(context.Background(), queue, 1, wait)
	must(t, "reserve "+queue, err)
	if len(ts) != 0 {
		t.Fatalf("reserve of %s handed out %s (%+v); want none", queue, ts[0].ID, ts[0])
	}
}

// reserveWaits fails t unless a reserve of queue waiting wait hands out
// nothing and waits it out: a limit met makes a reserver wait, not spin.
func reserveWaits(t *testing.T, b service.Service, queue string, wait time.Duration) {
	t.Helper()
	start := time.Now()
	reserveNone(t, b, queue, wait)
	if since := time.Since(start); since < wait-timeSlack {
		t.Fatalf("reserve of %s waiting %v answered nothing after %v", queue, wait, since)
	}
}

// within fails t unless at is in [lo − timeSlack, hi + lateSlack].
func within(t *testing.T, what string, at, lo, hi time.Time) {
	t.Helper()
	if at.Before(lo.Add(-timeSlack)) {
		t.Fatalf("%s at %v: %v early (due no earlier than %v)", what, at, lo.Sub(at), lo)
	}
	if at.After(hi.Add(lateSlack)) {
		t.Fatalf("%s at %v: %v after %v", what, at, at.Sub(hi), hi)
	}
}

// dueWithin fails t unless at, a time an engine computed during a call
// that began at lo − d and ended at hi − d, is in [lo − timeSlack,
// hi + dueSlack].
func dueWithin(t *testing.T, what string, at, lo, hi time.Time) {
	t.Helper()
	if at.Before(lo.Add(-timeSlack)) || at.After(hi.Add(dueSlack)) {
		t.Fatalf("%s %v: want within [%v, %v] (%v early, %v late)", what, at, lo, hi, lo.Sub(at), at.Sub(hi))
	}
}

// waitState polls queue's task id on b until it is in state st, for up
// to lateSlack plus after, and returns it.
func waitState(t *testing.T, b service.Service, queue, id string, st task.State, after time.Duration) task.Task {
	t.Helper()
	deadline := time.Now().Add(after + lateSlack)
	for {
		tk, err := b.Get(queue, id)
		must(t, "get "+id, err)
		if tk.State == st {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s of %s is %s after %v; want %s", id, queue, tk.State, after+lateSlack, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGone polls queue's task id on b until it is no longer reserved,
// for up to lateSlack plus after, and returns it.
func waitGone(t *testing.T, b service.Service, queue, id string, after time.Duration) task.Task {
	t.Helper()
	deadline := time.Now().Add(after + lateSlack)
	for {
		tk, err := b.Get(queue, id)
		must(t, "get "+id, err)
		if tk.State != task.Reserved {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s of %s still reserved after %v", id, queue, after+lateSlack)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// policyCRUD: a queue's policy recorded, reported, refused when bad,
// deleted; a queue with a policy listed even when empty.
func policyCRUD(t *testing.T, b service.Service) {
	ctx := context.Background()
	p, err := b.Policy(ctx, "crud")
	must(t, "policy of a queue without one", err)
	if !p.IsZero() {
		t.Fatalf("policy of a queue without one = %+v; want the zero policy", p)
	}
	_, err = b.Policy(ctx, "bad queue")
	wantErr(t, "policy of a bad queue name", err, task.ErrInvalid)

	want := task.Policy{
		Retry:       &task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1},
		MaxAttempts: 3, TTR: 30 * time.Second,
		Rate:        &task.Rate{Limit: 10, Per: time.Second},
		Concurrency: 4, DeadLetter: "crud-dead",
	}
	norm := clonePolicy(service.NormalPolicy(want))
	got := setPolicy(t, b, "crud", want)
	if !reflect.DeepEqual(got, norm) || got.Rate.Burst != 10 {
		t.Fatalf("SetPolicy = %s; want %s (burst filled)", showPolicy(got), showPolicy(norm))
	}
	if got, err = b.Policy(ctx, "crud"); err != nil || !reflect.DeepEqual(got, norm) {
		t.Fatalf("Policy = %s, %v; want %s", showPolicy(got), err, showPolicy(norm))
	}
	s, ok := queueStats(t, b, "crud")
	if !ok || !reflect.DeepEqual(s.Policy, norm) || s.Ready+s.Delayed+s.Reserved+s.Dead != 0 {
		t.Fatalf("Queues lists crud (empty, with a policy): %v, %+v; want its policy %s", ok, s, showPolicy(norm))
	}
	if d, err := b.Queue("crud"); err != nil || !reflect.DeepEqual(d.Policy, norm) {
		t.Fatalf("Queue(crud) = %+v, %v; want its policy %s", d, err, showPolicy(norm))
	}
	// What a caller holds is its own: changing it changes no policy.
	want.Retry.Max, want.Rate.Limit = time.Hour, 99
	got.Retry.Max, got.Rate.Limit = time.Hour, 98
	s.Policy.Retry.Max, s.Policy.Rate.Limit = time.Hour, 97
	if got, err = b.Policy(ctx, "crud"); err != nil || !reflect.DeepEqual(got, norm) {
		t.Fatalf("Policy after its callers changed what they hold = %s, %v; want %s", showPolicy(got), err, showPolicy(norm))
	}
	got.Retry.Max, got.Rate.Limit = time.Hour, 96
	if got, err = b.Policy(ctx, "crud"); err != nil || !reflect.DeepEqual(got, norm) {
		t.Fatalf("Policy after its caller changed the last answer = %s, %v; want %s", showPolicy(got), err, showPolicy(norm))
	}

	for _, bad := range []task.Policy{
		{Concurrency: -1},
		{DeadLetter: "crud"},
		{DeadLetter: "bad name"},
		{Retry: &task.Retry{Initial: 0, Max: time.Second, Multiplier: 2}},
		{Rate: &task.Rate{Limit: 0, Per: time.Second}},
		{TTR: service.MaxTTR + 1},
		{MaxAttempts: -2},
		{Retry: &task.Retry{Initial: -time.Second}},
		{Retry: &task.Retry{Initial: 0, Max: 0, Multiplier: 0.5}},
		{Retry: &task.Retry{Initial: 0, Jitter: 2}},
	} {
		_, err := b.SetPolicy(ctx, "crud", bad)
		wantErr(t, "set a bad policy "+showPolicy(bad), err, task.ErrInvalid)
	}
	_, err = b.SetPolicy(ctx, "bad queue", task.Policy{MaxAttempts: 1})
	wantErr(t, "set the policy of a bad queue name", err, task.ErrInvalid)
	if got, err = b.Policy(ctx, "crud"); err != nil || !reflect.DeepEqual(got, norm) {
		t.Fatalf("Policy after bad ones were refused = %s, %v; want %s unchanged", showPolicy(got), err, showPolicy(norm))
	}

	// A policy set replaces the whole policy.
	small := task.Policy{MaxAttempts: 2}
	setPolicy(t, b, "crud", small)
	if got, err = b.Policy(ctx, "crud"); err != nil || !reflect.DeepEqual(got, small) {
		t.Fatalf("Policy after a replacement = %s, %v; want %s", showPolicy(got), err, showPolicy(small))
	}

	// Immediate retries and unlimited attempts are recorded as asked, not
	// read back as the defaults.
	explicit := task.Policy{Retry: &task.Retry{}, MaxAttempts: task.UnlimitedAttempts}
	setPolicy(t, b, "crud", explicit)
	if got, err = b.Policy(ctx, "crud"); err != nil || !reflect.DeepEqual(got, explicit) {
		t.Fatalf("Policy of immediate retries and unlimited attempts = %s, %v; want %s", showPolicy(got), err, showPolicy(explicit))
	}
	if s, ok := queueStats(t, b, "crud"); !ok || !reflect.DeepEqual(s.Policy, explicit) {
		t.Fatalf("Queues lists crud with %s; want %s", showPolicy(s.Policy), showPolicy(explicit))
	}

	must(t, "delete the policy", b.DeletePolicy(ctx, "crud"))
	if got, err = b.Policy(ctx, "crud"); err != nil || !got.IsZero() {
		t.Fatalf("Policy after DeletePolicy = %s, %v; want the zero policy", showPolicy(got), err)
	}
	if s, ok := queueStats(t, b, "crud"); ok && !s.Policy.IsZero() {
		t.Fatalf("Queues after DeletePolicy lists crud with %s", showPolicy(s.Policy))
	}
	must(t, "delete the policy of a queue without one", b.DeletePolicy(ctx, "crud-none"))
	wantErr(t, "delete the policy of a bad queue name", b.DeletePolicy(ctx, "bad queue"), task.ErrInvalid)
}

// clonePolicy returns p with its own Retry and Rate.
func clonePolicy(p task.Policy) task.Policy {
	if p.Retry != nil {
		r := *p.Retry
		p.Retry = &r
	}
	if p.Rate != nil {
		r := *p.Rate
		p.Rate = &r
	}
	return p
}

// showPolicy spells p with its Retry and Rate, for a message.
func showPolicy(p task.Policy) string {
	s := fmt.Sprintf("{MaxAttempts:%d TTR:%v Concurrency:%d DeadLetter:%q", p.MaxAttempts, p.TTR, p.Concurrency, p.DeadLetter)
	if p.Retry != nil {
		s += fmt.Sprintf(" Retry:%+v", *p.Retry)
	}
	if p.Rate != nil {
		s += fmt.Sprintf(" Rate:%+v", *p.Rate)
	}
	return s + "}"
}

// putDefaultsRule: over every combination of a put's ttr and
// max_attempts (none, its own, unlimited) and its queue policy's, the
// task an engine records, in its answer and read back, in a put and a
// batch put, is service.ApplyDefaults's with the engine's default ttr:
// the rule is written once in Go, and an engine that applies it
// elsewhere (the cluster's put statement) must agree.
func putDefaultsRule(t *testing.T, b service.Service) {
	ctx := context.Background()
	serverTTR := b.Limits().DefaultTTR
	ttrs := []time.Duration{0, 7 * time.Second}
	maxes := []int{0, 3, task.UnlimitedAttempts}
	n := 0
	for _, pTTR := range []time.Duration{0, 9 * time.Second} {
		for _, pMax := range []int{0, 4, task.UnlimitedAttempts} {
			n++
			queue := fmt.Sprintf("defaults-rule-%d", n)
			p := task.Policy{TTR: pTTR, MaxAttempts: pMax}
			if pTTR != 0 || pMax != 0 {
				setPolicy(t, b, queue, p)
			}
			var rs []task.PutRequest
			for _, ttr := range ttrs {
				for _, m := range maxes {
					rs = append(rs, task.PutRequest{ID: fmt.Sprintf("one-%v-%d", ttr, m), TTR: ttr, MaxAttempts: m})
				}
			}
			batch := make([]task.PutRequest, len(rs))
			for i, r := range rs {
				r.ID = "batch" + strings.TrimPrefix(r.ID, "one")
				batch[i] = r
			}
			got := make([]task.Task, 0, 2*len(rs))
			for _, r := range rs {
				got = append(got, putTask(t, b, queue, r))
			}
			for i, res := range b.PutBatch(ctx, queue, batch) {
				must(t, "batch put "+batch[i].ID, res.Err)
				got = append(got, res.Task)
			}
			for i, r := range append(rs, batch...) {
				want := r
				service.ApplyDefaults(&want, p, serverTTR)
				back, err := b.Get(queue, r.ID)
				must(t, "get "+r.ID, err)
				for _, tk := range []task.Task{got[i], back} {
					if tk.TTR != want.TTR || tk.MaxAttempts != want.MaxAttempts {
						t.Errorf("put ttr %v, max_attempts %d into a queue of policy ttr %v, max_attempts %d: recorded ttr %v, max_attempts %d; ApplyDefaults says %v, %d",
							r.TTR, r.MaxAttempts, pTTR, pMax, tk.TTR, tk.MaxAttempts, want.TTR, want.MaxAttempts)
					}
				}
			}
		}
	}
}

// putDefaults: a policy's ttr and max_attempts fill puts that give none.
func putDefaults(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "defaults", task.Policy{TTR: 30 * time.Second, MaxAttempts: 3})
	d := putTask(t, b, "defaults", task.PutRequest{ID: "d"})
	if d.TTR != 30*time.Second || d.MaxAttempts != 3 {
		t.Fatalf("put without ttr and max_attempts: ttr %v, max_attempts %d; want the policy's 30s, 3", d.TTR, d.MaxAttempts)
	}
	own := putTask(t, b, "defaults", task.PutRequest{ID: "own", TTR: 5 * time.Second, MaxAttempts: 7})
	if own.TTR != 5*time.Second || own.MaxAttempts != 7 {
		t.Fatalf("put with its own: ttr %v, max_attempts %d; want 5s, 7", own.TTR, own.MaxAttempts)
	}
	res := b.PutBatch(ctx, "defaults", []task.PutRequest{{ID: "batch"}})
	if res[0].Err != nil || res[0].Task.TTR != 30*time.Second || res[0].Task.MaxAttempts != 3 {
		t.Fatalf("batch put without ttr and max_attempts: %+v", res[0])
	}
	rep, _, err := b.Put(ctx, "defaults", task.PutRequest{ID: "own", Replace: true})
	must(t, "replace own", err)
	if rep.TTR != 30*time.Second || rep.MaxAttempts != 3 {
		t.Fatalf("replacement without ttr and max_attempts: ttr %v, max_attempts %d; want the policy's 30s, 3", rep.TTR, rep.MaxAttempts)
	}
	// The lease of a task put without a ttr lasts the policy's.
	before := time.Now()
	r := ReserveOne(t, b, "defaults", time.Second)
	if r.ID != "d" {
		t.Fatalf("reserved %s; want d", r.ID)
	}
	dueWithin(t, "lease of d's end", r.LeaseUntil, before.Add(30*time.Second), time.Now().Add(30*time.Second))

	// A schedule's occurrences are puts too.
	setPolicy(t, b, "defaults-cron", task.Policy{TTR: 7 * time.Second, MaxAttempts: 3})
	_, _, err = b.SetSchedule(ctx, task.ScheduleSpec{Name: "defaults-cron", Cron: "@every 1s", Queue: "defaults-cron"})
	must(t, "set schedule", err)
	occ := ReserveOne(t, b, "defaults-cron", time.Second+lateSlack)
	must(t, "delete schedule", b.DeleteSchedule(ctx, "defaults-cron"))
	if occ.TTR != 7*time.Second || occ.MaxAttempts != 3 {
		t.Fatalf("a schedule's occurrence: ttr %v, max_attempts %d; want the policy's 7s, 3", occ.TTR, occ.MaxAttempts)
	}

	// A queue without a policy: the server's defaults; a put's
	// UnlimitedAttempts is recorded as 0, no limit.
	n := putTask(t, b, "no-defaults", task.PutRequest{ID: "n"})
	if n.TTR != task.DefaultTTR || n.MaxAttempts != service.DefaultMaxAttempts {
		t.Fatalf("put into a queue without a policy: ttr %v, max_attempts %d; want %v, %d",
			n.TTR, n.MaxAttempts, task.DefaultTTR, service.DefaultMaxAttempts)
	}
	if u := putTask(t, b, "no-defaults", task.PutRequest{ID: "u", MaxAttempts: task.UnlimitedAttempts}); u.MaxAttempts != 0 {
		t.Fatalf("put of unlimited attempts into a queue without a policy: max_attempts %d; want 0 (no limit)", u.MaxAttempts)
	}
	// A policy's unlimited attempts fill a put that gives none; a put's
	// own still wins.
	setPolicy(t, b, "unlimited", task.Policy{MaxAttempts: task.UnlimitedAttempts})
	if u := putTask(t, b, "unlimited", task.PutRequest{ID: "u"}); u.MaxAttempts != 0 {
		t.Fatalf("put into a queue of unlimited attempts: max_attempts %d; want 0 (no limit)", u.MaxAttempts)
	}
	if o := putTask(t, b, "unlimited", task.PutRequest{ID: "o", MaxAttempts: 4}); o.MaxAttempts != 4 {
		t.Fatalf("put of its own max_attempts into a queue of unlimited attempts: %d; want 4", o.MaxAttempts)
	}
	res = b.PutBatch(ctx, "no-defaults", []task.PutRequest{{ID: "b1"}, {ID: "b2", MaxAttempts: task.UnlimitedAttempts}})
	if res[0].Err != nil || res[1].Err != nil || res[0].Task.MaxAttempts != service.DefaultMaxAttempts || res[1].Task.MaxAttempts != 0 {
		t.Fatalf("batch put into a queue without a policy: %+v; want max_attempts %d and 0", res, service.DefaultMaxAttempts)
	}
	_, _, err = b.Put(ctx, "no-defaults", task.PutRequest{ID: "bad", MaxAttempts: -2})
	wantErr(t, "put of max_attempts -2", err, task.ErrInvalid)

	// A schedule's tasks: the default, or unlimited when it asks.
	for _, c := range []struct{ given, want int }{{0, service.DefaultMaxAttempts}, {task.UnlimitedAttempts, 0}} {
		_, _, err = b.SetSchedule(ctx, task.ScheduleSpec{Name: "defaults-run", Cron: "@yearly", Queue: "no-defaults", MaxAttempts: c.given, Paused: true})
		must(t, "set schedule", err)
		run, err := b.RunSchedule(ctx, "defaults-run")
		must(t, "run schedule", err)
		if run.MaxAttempts != c.want {
			t.Fatalf("run of a schedule of max_attempts %d into a queue without a policy: max_attempts %d; want %d", c.given, run.MaxAttempts, c.want)
		}
		must(t, "delete the run", b.Delete(ctx, "no-defaults", run.ID))
	}
	must(t, "delete schedule", b.DeleteSchedule(ctx, "defaults-run"))
	_, _, err = b.SetSchedule(ctx, task.ScheduleSpec{Name: "defaults-run", Cron: "@yearly", Queue: "no-defaults", MaxAttempts: -2})
	wantErr(t, "schedule of max_attempts -2", err, task.ErrInvalid)
}

// existingTasks: a policy set applies to the tasks already in the queue.
func existingTasks(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "late", task.PutRequest{ID: "x"})
	putTask(t, b, "late", task.PutRequest{ID: "y", MaxAttempts: 1})
	putTask(t, b, "late", task.PutRequest{ID: "z"})
	const delay = 200 * time.Millisecond
	setPolicy(t, b, "late", task.Policy{
		Retry:       &task.Retry{Initial: delay, Max: time.Second, Multiplier: 1},
		Concurrency: 1, DeadLetter: "late-dead",
	})
	ts, err := b.Reserve(ctx, "late", 3, 0)
	must(t, "reserve 3 under a concurrency of 1", err)
	if len(ts) != 1 || ts[0].ID != "x" {
		t.Fatalf("reserve 3 of tasks put before a concurrency of 1: %+v; want x alone", ts)
	}
	t0 := time.Now()
	n, err := b.Nack(ctx, "late", "x", ts[0].Lease, task.RetryDelay, "")
	t1 := time.Now()
	must(t, "nack x", err)
	if n.State != task.Delayed {
		t.Fatalf("nack of a task put before the retry policy = %+v; want delayed", n)
	}
	dueWithin(t, "x's due", n.Due, t0.Add(delay), t1.Add(delay))

	r := ReserveOne(t, b, "late", time.Second)
	if r.ID != "y" {
		t.Fatalf("reserved %s; want y", r.ID)
	}
	n, err = b.Nack(ctx, "late", "y", r.Lease, task.RetryDelay, "dead")
	must(t, "nack y", err)
	if n.Queue != "late-dead" || n.State != task.Ready {
		t.Fatalf("last failure of a task put before the dead-letter policy = %+v; want ready in late-dead", n)
	}

	// Deleted: the default back-off again.
	must(t, "delete the policy", b.DeletePolicy(ctx, "late"))
	r = ReserveOne(t, b, "late", time.Second)
	t0 = time.Now()
	n, err = b.Nack(ctx, "late", r.ID, r.Lease, task.RetryDelay, "")
	t1 = time.Now()
	must(t, "nack after the policy's deletion", err)
	if n.State != task.Delayed {
		t.Fatalf("nack after the policy's deletion = %+v; want delayed by the default back-off", n)
	}
	dueWithin(t, "due after the policy's deletion", n.Due, t0.Add(900*time.Millisecond), t1.Add(1100*time.Millisecond))
}
