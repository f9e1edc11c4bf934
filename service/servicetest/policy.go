package servicetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
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
	t.Run("nack", func(t *testing.T) { nackPolicy(t, b) })
	t.Run("backoff", func(t *testing.T) { backoff(t, b) })
	t.Run("jitter", func(t *testing.T) { jitter(t, b) })
	t.Run("lease-expiry", func(t *testing.T) { leaseExpiry(t, b) })
	t.Run("release", func(t *testing.T) { release(t, b) })
	t.Run("bury", func(t *testing.T) { bury(t, b) })
	t.Run("dead-letter", func(t *testing.T) { deadLetter(t, b) })
	t.Run("dead-letter-limits", func(t *testing.T) { deadLetterLimits(t, b) })
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
		{MaxAttempts: -1},
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

	// A queue without a policy: the server's defaults.
	n := putTask(t, b, "no-defaults", task.PutRequest{ID: "n"})
	if n.TTR != task.DefaultTTR || n.MaxAttempts != 0 {
		t.Fatalf("put into a queue without a policy: ttr %v, max_attempts %d; want %v, 0", n.TTR, n.MaxAttempts, task.DefaultTTR)
	}
}

// nackPolicy: Nack's answer, its reason kept, the retry policy's delay
// or the caller's, death at the last attempt.
func nackPolicy(t *testing.T, b service.Service) {
	ctx := context.Background()

	// Without a policy: ready at once; the reason kept, cut and made valid.
	putTask(t, b, "nack", task.PutRequest{ID: "a", MaxAttempts: 5})
	r := ReserveOne(t, b, "nack", time.Second)
	n, err := b.Nack(ctx, "nack", "a", r.Lease, task.RetryDelay, "boom")
	must(t, "nack", err)
	if n.State != task.Ready || n.ID != "a" || n.Queue != "nack" || n.LastError != "boom" || n.Attempts != 1 {
		t.Fatalf("Nack without a policy = %+v; want a ready, last error boom, attempts 1", n)
	}
	if g, err := b.Get("nack", "a"); err != nil || g.LastError != "boom" || g.State != task.Ready {
		t.Fatalf("Get after the nack = %+v, %v; want ready, last error boom", g, err)
	}
	long := strings.Repeat("é", task.MaxErrorLen) + "\xff"
	r = ReserveOne(t, b, "nack", time.Second)
	n, err = b.Nack(ctx, "nack", "a", r.Lease, task.RetryDelay, long)
	must(t, "nack with a long reason", err)
	if want := service.CutError(long); n.LastError != want || len(n.LastError) != task.MaxErrorLen {
		t.Fatalf("Nack with a reason of %d bytes kept %d bytes; want %d (CutError)", len(long), len(n.LastError), len(want))
	}
	if g, _ := b.Get("nack", "a"); g.LastError != service.CutError(long) {
		t.Fatalf("Get after a long reason: last error of %d bytes; want %d", len(g.LastError), task.MaxErrorLen)
	}
	r = ReserveOne(t, b, "nack", time.Second)
	n, err = b.Nack(ctx, "nack", "a", r.Lease, 0, "bad \xff byte")
	must(t, "nack with invalid UTF-8", err)
	if n.LastError != "bad \uFFFD byte" {
		t.Fatalf("Nack kept %q; want the invalid byte replaced", n.LastError)
	}

	// The caller's delay: delayed, with the due it will have.
	r = ReserveOne(t, b, "nack", time.Second)
	t0 := time.Now()
	n, err = b.Nack(ctx, "nack", "a", r.Lease, 200*time.Millisecond, "later")
	t1 := time.Now()
	must(t, "nack with a delay", err)
	if n.State != task.Delayed {
		t.Fatalf("Nack with a delay = %+v; want delayed", n)
	}
	dueWithin(t, "nack's due", n.Due, t0.Add(200*time.Millisecond), t1.Add(200*time.Millisecond))
	if g, _ := b.Get("nack", "a"); g.Due.Sub(n.Due).Abs() > timeSlack || g.State != task.Delayed {
		t.Fatalf("Get after a nack with a delay: %v, due %v; want delayed, due %v", g.State, g.Due, n.Due)
	}
	r = ReserveOne(t, b, "nack", 200*time.Millisecond+lateSlack)
	within(t, "reserve after a nack's delay", time.Now(), t0.Add(200*time.Millisecond), t1.Add(200*time.Millisecond))

	// The last attempt: dead, the reason kept.
	n, err = b.Nack(ctx, "nack", "a", r.Lease, task.RetryDelay, "last")
	must(t, "nack of the last attempt", err)
	if n.State != task.Dead || n.Queue != "nack" || n.LastError != "last" || n.Attempts != 5 {
		t.Fatalf("Nack of the last attempt = %+v; want dead in nack, last error \"last\", attempts 5", n)
	}
	if s, _ := queueStats(t, b, "nack"); s.Dead != 1 {
		t.Fatalf("queue nack: %+v; want 1 dead", s)
	}
	_, err = b.Nack(ctx, "nack", "a", r.Lease, 0, "again")
	if err == nil {
		t.Fatal("nack of a dead task: no error")
	}

	// A negative delay other than task.RetryDelay is refused; a nack
	// without a reason leaves no last error.
	putTask(t, b, "nack", task.PutRequest{ID: "c"})
	r = ReserveOne(t, b, "nack", time.Second)
	_, err = b.Nack(ctx, "nack", "c", r.Lease, -2, "")
	wantErr(t, "nack with a delay of -2ns", err, task.ErrInvalid)
	n, err = b.Nack(ctx, "nack", "c", r.Lease, 0, "first")
	must(t, "nack c", err)
	r = ReserveOne(t, b, "nack", time.Second)
	if r.LastError != "first" {
		t.Fatalf("reserved after a nack: last error %q; want first", r.LastError)
	}
	n, err = b.Nack(ctx, "nack", "c", r.Lease, 0, "")
	must(t, "nack c without a reason", err)
	if n.LastError != "" {
		t.Fatalf("nack without a reason kept %q; want none (the last attempt said nothing)", n.LastError)
	}

	// A retry policy: delayed within the back-off's bounds; the caller's
	// delay wins.
	retry := &task.Retry{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}
	setPolicy(t, b, "nack-retry", task.Policy{Retry: retry})
	putTask(t, b, "nack-retry", task.PutRequest{ID: "b"})
	r = ReserveOne(t, b, "nack-retry", time.Second)
	t0 = time.Now()
	n, err = b.Nack(ctx, "nack-retry", "b", r.Lease, task.RetryDelay, "")
	t1 = time.Now()
	must(t, "nack under a retry policy", err)
	if n.State != task.Delayed {
		t.Fatalf("Nack under a retry policy = %+v; want delayed", n)
	}
	dueWithin(t, "back-off's due", n.Due, t0.Add(80*time.Millisecond), t1.Add(120*time.Millisecond))
	r = ReserveOne(t, b, "nack-retry", 120*time.Millisecond+lateSlack)
	within(t, "reserve after the back-off", time.Now(), t0.Add(80*time.Millisecond), t1.Add(120*time.Millisecond))
	n, err = b.Nack(ctx, "nack-retry", "b", r.Lease, 0, "")
	must(t, "nack with a delay of 0 under a retry policy", err)
	if n.State != task.Ready {
		t.Fatalf("Nack with a delay of 0 under a retry policy = %+v; want ready at once", n)
	}
	r = ReserveOne(t, b, "nack-retry", time.Second)
	t0 = time.Now()
	n, err = b.Nack(ctx, "nack-retry", "b", r.Lease, 700*time.Millisecond, "")
	t1 = time.Now()
	must(t, "nack with a delay under a retry policy", err)
	dueWithin(t, "caller's due under a retry policy", n.Due, t0.Add(700*time.Millisecond), t1.Add(700*time.Millisecond))
}

// backoff: over several attempts (initial 50ms, multiplier 2, max
// 300ms, jitter 0.1), attempt n+1 comes no earlier than
// min(300ms, 50ms × 2^(n−1)) × 0.9 after the n-th failed.
func backoff(t *testing.T, b service.Service) {
	ctx := context.Background()
	retry := &task.Retry{Initial: 50 * time.Millisecond, Max: 300 * time.Millisecond, Multiplier: 2, Jitter: 0.1}
	setPolicy(t, b, "backoff", task.Policy{Retry: retry})
	putTask(t, b, "backoff", task.PutRequest{ID: "x"})
	r := ReserveOne(t, b, "backoff", time.Second)
	for n := 1; n <= 5; n++ {
		if r.Attempts != n {
			t.Fatalf("attempt %d: task says %d attempts", n, r.Attempts)
		}
		base := min(retry.Max, retry.Initial<<(n-1))
		lo, hi := time.Duration(float64(base)*0.9), time.Duration(float64(base)*1.1)
		t0 := time.Now()
		tk, err := b.Nack(ctx, "backoff", "x", r.Lease, task.RetryDelay, fmt.Sprintf("failure %d", n))
		t1 := time.Now()
		must(t, "nack", err)
		dueWithin(t, fmt.Sprintf("due after failure %d", n), tk.Due, t0.Add(lo), t1.Add(hi))
		r = ReserveOne(t, b, "backoff", hi+lateSlack)
		within(t, fmt.Sprintf("attempt %d", n+1), time.Now(), t0.Add(lo), t1.Add(hi))
		if r.LastError != fmt.Sprintf("failure %d", n) {
			t.Fatalf("attempt %d: last error %q; want the last nack's", n+1, r.LastError)
		}
	}
}

// jitter: each failure draws its delay anew within the jitter's bounds.
func jitter(t *testing.T, b service.Service) {
	ctx := context.Background()
	const initial = time.Second
	setPolicy(t, b, "jitter", task.Policy{Retry: &task.Retry{Initial: initial, Max: initial, Multiplier: 1, Jitter: 1}})
	const n = 10
	for i := range n {
		putTask(t, b, "jitter", task.PutRequest{ID: fmt.Sprint(i)})
	}
	ts, err := b.Reserve(ctx, "jitter", n, time.Second)
	must(t, "reserve", err)
	if len(ts) != n {
		t.Fatalf("reserved %d of %d", len(ts), n)
	}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for _, r := range ts {
		t0 := time.Now()
		tk, err := b.Nack(ctx, "jitter", r.ID, r.Lease, task.RetryDelay, "")
		t1 := time.Now()
		must(t, "nack", err)
		dueWithin(t, "due under a jitter of 1", tk.Due, t0, t1.Add(2*initial))
		d := tk.Due.Sub(t0)
		lo, hi = min(lo, d), max(hi, d)
	}
	// 10 draws of [0, 2s] within 200 ms of each other: odds about 1e-8.
	if hi-lo < 200*time.Millisecond {
		t.Fatalf("%d delays under a jitter of 1 all within [%v, %v]: the jitter is not drawn for each", n, lo, hi)
	}
}

// leaseExpiry: a lease that runs out counts as a failure: the task comes
// back delayed per the retry policy with last error "lease expired", and
// dies at max_attempts.
func leaseExpiry(t *testing.T, b service.Service) {
	const ttr, delay = 100 * time.Millisecond, 150 * time.Millisecond
	setPolicy(t, b, "expiry", task.Policy{
		TTR: ttr, MaxAttempts: 2,
		Retry: &task.Retry{Initial: delay, Max: time.Second, Multiplier: 1},
	})
	putTask(t, b, "expiry", task.PutRequest{ID: "x"})
	r := ReserveOne(t, b, "expiry", time.Second)
	if r.TTR != ttr || r.MaxAttempts != 2 {
		t.Fatalf("reserved %+v; want the policy's ttr 100ms, max_attempts 2", r)
	}
	leaseEnd := r.LeaseUntil
	d := waitGone(t, b, "expiry", "x", ttr)
	if d.State != task.Delayed && d.State != task.Ready || d.LastError != task.LeaseExpired || d.Lease != "" || d.Timeouts != 1 {
		t.Fatalf("task after its lease ran out = %+v; want delayed, last error %q", d, task.LeaseExpired)
	}
	if d.Due.Before(leaseEnd.Add(delay - timeSlack)) {
		t.Fatalf("task due %v after its lease ran out; want the retry policy's %v or more", d.Due.Sub(leaseEnd), delay)
	}
	r = ReserveOne(t, b, "expiry", delay+lateSlack)
	if now := time.Now(); now.Before(leaseEnd.Add(delay - timeSlack)) {
		t.Fatalf("reserved again %v after the lease's end; want %v or more", now.Sub(leaseEnd), delay)
	}
	if r.Attempts != 2 || r.LastError != task.LeaseExpired {
		t.Fatalf("second attempt = %+v; want attempts 2, last error %q", r, task.LeaseExpired)
	}
	dead := waitState(t, b, "expiry", "x", task.Dead, ttr)
	if dead.LastError != task.LeaseExpired || dead.Attempts != 2 || dead.Timeouts != 2 {
		t.Fatalf("task dead after its last lease ran out = %+v", dead)
	}
}

// release: a released task's attempt is not spent; its delay honoured.
func release(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "release", task.PutRequest{ID: "one", MaxAttempts: 1})
	r := ReserveOne(t, b, "release", time.Second)
	_, err := b.Release(ctx, "release", "one", "nope", 0)
	wantErr(t, "release under another lease", err, task.ErrLease)
	_, err = b.Release(ctx, "release", "none", "nope", 0)
	wantErr(t, "release of an unknown task", err, task.ErrNotFound)
	rel, err := b.Release(ctx, "release", "one", r.Lease, 0)
	must(t, "release", err)
	if rel.State != task.Ready || rel.ID != "one" || rel.Queue != "release" {
		t.Fatalf("Release = %+v; want one, ready", rel)
	}
	_, err = b.Release(ctx, "release", "one", r.Lease, 0)
	if err == nil {
		t.Fatal("release of a released task: no error")
	}
	r = ReserveOne(t, b, "release", time.Second) // not dead: its one attempt was not spent
	n, err := b.Nack(ctx, "release", "one", r.Lease, 0, "")
	must(t, "nack", err)
	if n.State != task.Dead {
		t.Fatalf("nack of a max_attempts 1 task after a release = %+v; want dead", n)
	}

	// Released attempts never count: two reservations, one released, then
	// a failure leaves one of two attempts.
	putTask(t, b, "release", task.PutRequest{ID: "two", MaxAttempts: 2})
	r = ReserveOne(t, b, "release", time.Second)
	_, err = b.Release(ctx, "release", "two", r.Lease, 0)
	must(t, "release two", err)
	r = ReserveOne(t, b, "release", time.Second)
	n, err = b.Nack(ctx, "release", "two", r.Lease, 0, "")
	must(t, "nack two", err)
	if n.State != task.Ready {
		t.Fatalf("two after a release and a failure = %+v; want ready (one attempt of 2 spent)", n)
	}

	// A delay honoured.
	r = ReserveOne(t, b, "release", time.Second)
	t0 := time.Now()
	rel, err = b.Release(ctx, "release", "two", r.Lease, 150*time.Millisecond)
	t1 := time.Now()
	must(t, "release with a delay", err)
	if rel.State != task.Delayed {
		t.Fatalf("Release with a delay = %+v; want delayed", rel)
	}
	dueWithin(t, "release's due", rel.Due, t0.Add(150*time.Millisecond), t1.Add(150*time.Millisecond))
	ReserveOne(t, b, "release", 150*time.Millisecond+lateSlack)
	within(t, "reserve after a release's delay", time.Now(), t0.Add(150*time.Millisecond), t1.Add(150*time.Millisecond))
	_, err = b.Release(ctx, "release", "two", r.Lease, task.RetryDelay)
	wantErr(t, "release with a negative delay", err, task.ErrInvalid)

	// beanstalkd's release, unlike Release, counts the attempt against
	// max_attempts (service/policy.go).
	three := putTask(t, b, "release-job", task.PutRequest{ID: "three", MaxAttempts: 2})
	r = ReserveOne(t, b, "release-job", time.Second)
	must(t, "release-job", b.ReleaseJob(ctx, three.JobID, r.Lease, 1, 0))
	r = ReserveOne(t, b, "release-job", time.Second)
	if r.Attempts != 2 {
		t.Fatalf("reserved after a beanstalkd release: attempts %d; want 2", r.Attempts)
	}
	n, err = b.Nack(ctx, "release-job", "three", r.Lease, 0, "")
	must(t, "nack three", err)
	if n.State != task.Dead {
		t.Fatalf("nack after a beanstalkd release and a reservation = %+v; want dead (2 attempts of 2)", n)
	}
}

// bury: dead whatever attempts remain, its reason kept; Kick brings it
// back.
func bury(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "bury", task.PutRequest{ID: "x", MaxAttempts: 5})
	r := ReserveOne(t, b, "bury", time.Second)
	_, err := b.Bury(ctx, "bury", "x", "nope", "poison")
	wantErr(t, "bury under another lease", err, task.ErrLease)
	d, err := b.Bury(ctx, "bury", "x", r.Lease, "poison")
	must(t, "bury", err)
	if d.State != task.Dead || d.Queue != "bury" || d.LastError != "poison" {
		t.Fatalf("Bury = %+v; want dead in bury, last error poison", d)
	}
	if g, err := b.Get("bury", "x"); err != nil || g.State != task.Dead || g.LastError != "poison" {
		t.Fatalf("Get after Bury = %+v, %v", g, err)
	}
	if s, _ := queueStats(t, b, "bury"); s.Dead != 1 || s.Reserved != 0 {
		t.Fatalf("queue bury: %+v; want 1 dead", s)
	}
	// Every view of the task shows its last error.
	if j, err := b.Job(d.JobID); err != nil || j.LastError != "poison" {
		t.Fatalf("Job after Bury: last error %q, %v", j.LastError, err)
	}
	if p, err := b.Peek("bury", task.Dead); err != nil || p.LastError != "poison" {
		t.Fatalf("Peek dead after Bury: last error %q, %v", p.LastError, err)
	}
	if page, _, err := b.ListTasks(ctx, "bury", task.Dead, 0, 10); err != nil || len(page) != 1 || page[0].LastError != "poison" {
		t.Fatalf("ListTasks dead after Bury: %+v, %v; want x, last error poison", page, err)
	}
	must(t, "kick", b.Kick(ctx, "bury", "x"))
	r = ReserveOne(t, b, "bury", time.Second)
	if r.ID != "x" || r.LastError != "poison" {
		t.Fatalf("reserved %+v after the kick; want x, last error poison kept", r)
	}
	d, err = b.Bury(ctx, "bury", "x", r.Lease, strings.Repeat("x", task.MaxErrorLen+10))
	must(t, "bury with a long reason", err)
	if len(d.LastError) != task.MaxErrorLen {
		t.Fatalf("Bury kept %d bytes of reason; want %d", len(d.LastError), task.MaxErrorLen)
	}
}

// deadLetter: a task whose attempts are used up moves to the dead-letter
// queue, ready, with its id, payload, attempts and last error, replacing
// a task of the same id there.
func deadLetter(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "dl", task.Policy{MaxAttempts: 2, DeadLetter: "dl-dead"})
	putTask(t, b, "dl", task.PutRequest{ID: "a", Payload: []byte(`"pa"`), Priority: 3})
	r := ReserveOne(t, b, "dl", time.Second)
	n, err := b.Nack(ctx, "dl", "a", r.Lease, 0, "e1")
	must(t, "nack 1", err)
	if n.State != task.Ready || n.Queue != "dl" {
		t.Fatalf("first failure = %+v; want ready in dl", n)
	}
	r = ReserveOne(t, b, "dl", time.Second)
	n, err = b.Nack(ctx, "dl", "a", r.Lease, task.RetryDelay, "e2")
	must(t, "nack 2", err)
	if n.Queue != "dl-dead" || n.State != task.Ready || n.ID != "a" || n.Attempts != 2 || n.LastError != "e2" {
		t.Fatalf("Nack of the last attempt = %+v; want a, ready in dl-dead, attempts 2, last error e2", n)
	}
	_, err = b.Get("dl", "a")
	wantErr(t, "get from its own queue", err, task.ErrNotFound)
	g, err := b.Get("dl-dead", "a")
	must(t, "get from the dead-letter queue", err)
	if g.State != task.Ready || string(g.Payload) != `"pa"` || g.Attempts != 2 || g.LastError != "e2" || g.Queue != "dl-dead" {
		t.Fatalf("dead-lettered task = %+v", g)
	}
	if s, _ := queueStats(t, b, "dl"); s.Ready+s.Delayed+s.Reserved+s.Dead != 0 {
		t.Fatalf("queue dl after the move: %+v; want empty", s)
	}
	if s, _ := queueStats(t, b, "dl-dead"); s.Ready != 1 || s.Dead != 0 {
		t.Fatalf("queue dl-dead: %+v; want 1 ready", s)
	}
	m := ReserveOne(t, b, "dl-dead", time.Second)
	if m.ID != "a" || string(m.Payload) != `"pa"` {
		t.Fatalf("reserved from the dead-letter queue: %+v", m)
	}
	must(t, "ack in the dead-letter queue", b.Ack(ctx, "dl-dead", "a", m.Lease))

	// A task of the same id in the dead-letter queue is replaced.
	putTask(t, b, "dl-dead", task.PutRequest{ID: "b", Payload: []byte(`"old"`)})
	putTask(t, b, "dl", task.PutRequest{ID: "b", Payload: []byte(`"new"`), MaxAttempts: 1})
	r = ReserveOne(t, b, "dl", time.Second)
	n, err = b.Nack(ctx, "dl", "b", r.Lease, 0, "e")
	must(t, "nack b", err)
	if n.Queue != "dl-dead" || n.State != task.Ready {
		t.Fatalf("Nack of b = %+v; want ready in dl-dead", n)
	}
	if g, err := b.Get("dl-dead", "b"); err != nil || string(g.Payload) != `"new"` || g.Attempts != 1 || g.LastError != "e" {
		t.Fatalf("b in the dead-letter queue = %+v, %v; want the new one", g, err)
	}
	if s, _ := queueStats(t, b, "dl-dead"); s.Ready != 1 {
		t.Fatalf("queue dl-dead after the replacement: %+v; want 1 ready", s)
	}

	// A lease running out of the last attempt moves it too.
	setPolicy(t, b, "dl-expiry", task.Policy{TTR: 100 * time.Millisecond, MaxAttempts: 1, DeadLetter: "dl-expiry-dead"})
	putTask(t, b, "dl-expiry", task.PutRequest{ID: "e", Payload: []byte(`"pe"`)})
	r = ReserveOne(t, b, "dl-expiry", time.Second)
	moved := ReserveOne(t, b, "dl-expiry-dead", 100*time.Millisecond+lateSlack)
	if moved.ID != "e" || string(moved.Payload) != `"pe"` || moved.LastError != task.LeaseExpired || moved.Attempts != 2 {
		t.Fatalf("dead-lettered after its lease ran out: %+v; want e, last error %q, attempts 2", moved, task.LeaseExpired)
	}
	if now := time.Now(); now.Before(r.LeaseUntil.Add(-timeSlack)) {
		t.Fatalf("dead-lettered %v before its lease's end", r.LeaseUntil.Sub(now))
	}

	// A bury moves too.
	putTask(t, b, "dl", task.PutRequest{ID: "c"})
	r = ReserveOne(t, b, "dl", time.Second)
	n, err = b.Bury(ctx, "dl", "c", r.Lease, "buried")
	must(t, "bury c", err)
	if n.Queue != "dl-dead" || n.State != task.Ready || n.LastError != "buried" {
		t.Fatalf("Bury under a dead-letter policy = %+v; want ready in dl-dead", n)
	}
}

// deadLetterLimits: a task moving to a dead-letter queue frees its place
// under its queue's concurrency limit, and one it replaces there frees
// its own, even reserved; the replaced task's lease is void.
func deadLetterLimits(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "dlc", task.Policy{Concurrency: 1, MaxAttempts: 1, DeadLetter: "dlc-dead"})
	setPolicy(t, b, "dlc-dead", task.Policy{Concurrency: 1})
	putTask(t, b, "dlc-dead", task.PutRequest{ID: "a", Payload: []byte(`"old"`)})
	held := ReserveOne(t, b, "dlc-dead", time.Second)
	putTask(t, b, "dlc", task.PutRequest{ID: "a", Payload: []byte(`"new"`)})
	putTask(t, b, "dlc", task.PutRequest{ID: "b"})
	r := ReserveOne(t, b, "dlc", time.Second)
	if r.ID != "a" {
		t.Fatalf("reserved %s; want a", r.ID)
	}
	n, err := b.Nack(ctx, "dlc", "a", r.Lease, task.RetryDelay, "e")
	must(t, "nack a", err)
	if n.Queue != "dlc-dead" || n.State != task.Ready {
		t.Fatalf("Nack of a = %+v; want ready in dlc-dead", n)
	}
	if r = ReserveOne(t, b, "dlc", 0); r.ID != "b" {
		t.Fatalf("reserved %s after a moved; want b", r.ID)
	}
	m := ReserveOne(t, b, "dlc-dead", 0)
	if m.ID != "a" || string(m.Payload) != `"new"` {
		t.Fatalf("reserved %+v from the dead-letter queue; want the new a", m)
	}
	if err := b.Ack(ctx, "dlc-dead", "a", held.Lease); err == nil {
		t.Fatal("ack under the lease of a replaced task: no error")
	}
	must(t, "ack the new a", b.Ack(ctx, "dlc-dead", "a", m.Lease))
}

// pause: a paused queue hands out nothing until resumed or its pause
// ends; puts go on.
func pause(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "paused", task.PutRequest{ID: "a"})
	putTask(t, b, "unpaused", task.PutRequest{ID: "u"})
	wantErr(t, "pause of a bad queue name", b.PauseQueue(ctx, "bad queue", time.Second), task.ErrInvalid)
	must(t, "pause indefinitely", b.PauseQueue(ctx, "paused", task.PauseIndefinitely))
	reserveWaits(t, b, "paused", 50*time.Millisecond)
	putTask(t, b, "paused", task.PutRequest{ID: "b"})
	s, ok := queueStats(t, b, "paused")
	if !ok || !s.PausedUntil.Equal(task.PausedForever) || s.Ready != 2 {
		t.Fatalf("queue paused indefinitely: %+v; want PausedUntil %v, 2 ready", s, task.PausedForever)
	}
	if d, err := b.Queue("paused"); err != nil || !d.PausedUntil.Equal(task.PausedForever) || d.PauseLeft <= 0 {
		t.Fatalf("Queue(paused) paused indefinitely = %+v, %v; want PausedUntil %v", d, err, task.PausedForever)
	}
	ts, err := b.ReserveQueues(ctx, []string{"paused", "unpaused"}, 5, 0)
	must(t, "reserve of a paused queue and another", err)
	if len(ts) != 1 || ts[0].Queue != "unpaused" {
		t.Fatalf("reserve of a paused queue and another: %+v; want u alone", ts)
	}
	if _, ok, err := b.ReserveAny(ctx, []string{"paused"}, 0); ok || err != nil {
		t.Fatalf("ReserveAny of a paused queue: %v, %v", ok, err)
	}

	must(t, "resume", b.PauseQueue(ctx, "paused", 0))
	if s, _ := queueStats(t, b, "paused"); !s.PausedUntil.IsZero() {
		t.Fatalf("queue resumed: PausedUntil %v; want zero", s.PausedUntil)
	}
	ts, err = b.Reserve(ctx, "paused", 5, time.Second)
	must(t, "reserve of a resumed queue", err)
	if len(ts) != 2 {
		t.Fatalf("reserve of a resumed queue: %d tasks; want 2", len(ts))
	}

	// A timed pause ends by itself, and a reserver waiting through it gets
	// the task.
	putTask(t, b, "paused", task.PutRequest{ID: "c"})
	const d = 200 * time.Millisecond
	t0 := time.Now()
	must(t, "pause 200ms", b.PauseQueue(ctx, "paused", d))
	t1 := time.Now()
	s, _ = queueStats(t, b, "paused")
	dueWithin(t, "a timed pause's end", s.PausedUntil, t0.Add(d), t1.Add(d))
	c := ReserveOne(t, b, "paused", d+lateSlack)
	within(t, "reserve after a timed pause", time.Now(), t0.Add(d), t1.Add(d))
	if c.ID != "c" {
		t.Fatalf("reserved %s after the pause; want c", c.ID)
	}

	// A pause replaces the one before: a short one's end does not end a
	// longer one set after it, and a short one set after a longer one
	// ends when it says.
	putTask(t, b, "repause", task.PutRequest{ID: "r"})
	must(t, "pause 100ms", b.PauseQueue(ctx, "repause", 100*time.Millisecond))
	must(t, "pause indefinitely after", b.PauseQueue(ctx, "repause", task.PauseIndefinitely))
	reserveWaits(t, b, "repause", 300*time.Millisecond)
	if s, _ := queueStats(t, b, "repause"); !s.PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("a pause until resumed after one of 100ms: PausedUntil %v", s.PausedUntil)
	}
	t0 = time.Now()
	must(t, "pause 100ms after", b.PauseQueue(ctx, "repause", 100*time.Millisecond))
	t1 = time.Now()
	ReserveOne(t, b, "repause", 100*time.Millisecond+lateSlack)
	within(t, "reserve after a pause shortened", time.Now(), t0.Add(100*time.Millisecond), t1.Add(100*time.Millisecond))

	// An empty queue paused is listed with its pause.
	t0 = time.Now()
	must(t, "pause an empty queue", b.PauseQueue(ctx, "paused-empty", time.Hour))
	t1 = time.Now()
	s, ok = queueStats(t, b, "paused-empty")
	if !ok {
		t.Fatal("Queues does not list an empty queue paused")
	}
	dueWithin(t, "an empty queue's pause's end", s.PausedUntil, t0.Add(time.Hour), t1.Add(time.Hour))
	if s, _ := queueStats(t, b, "paused"); !s.PausedUntil.IsZero() {
		t.Fatalf("queue after its pause ended: PausedUntil %v; want zero", s.PausedUntil)
	}
}

// pauseAndPolicy: a queue's pause and its policy are set and cleared
// apart: neither setting nor deleting one changes the other.
func pauseAndPolicy(t *testing.T, b service.Service) {
	ctx := context.Background()
	const q = "pause-policy"
	p := task.Policy{MaxAttempts: 3}
	putTask(t, b, q, task.PutRequest{ID: "x"})
	must(t, "pause", b.PauseQueue(ctx, q, task.PauseIndefinitely))
	setPolicy(t, b, q, p)
	check := func(when string, paused bool, p task.Policy) {
		t.Helper()
		s, ok := queueStats(t, b, q)
		if !ok || s.PausedUntil.Equal(task.PausedForever) != paused || !reflect.DeepEqual(s.Policy, p) {
			t.Fatalf("%s: Queues lists %s: %v, %+v; want paused %v, policy %s", when, q, ok, s, paused, showPolicy(p))
		}
		if got, err := b.Policy(ctx, q); err != nil || !reflect.DeepEqual(got, p) {
			t.Fatalf("%s: Policy = %s, %v; want %s", when, showPolicy(got), err, showPolicy(p))
		}
	}
	check("a policy set on a paused queue", true, p)
	reserveNone(t, b, q, 0)
	must(t, "delete the policy", b.DeletePolicy(ctx, q))
	check("the policy of a paused queue deleted", true, task.Policy{})
	reserveNone(t, b, q, 0)
	setPolicy(t, b, q, p)
	must(t, "resume", b.PauseQueue(ctx, q, 0))
	check("a queue with a policy resumed", false, p)
	if r := ReserveOne(t, b, q, time.Second); r.ID != "x" {
		t.Fatalf("reserved %+v; want x", r)
	}
}

// concurrency: no more of a queue's tasks reserved at once than its
// limit, over any reserve and any number of reservers.
func concurrency(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "conc", task.Policy{Concurrency: 2})
	for i := range 5 {
		putTask(t, b, "conc", task.PutRequest{ID: fmt.Sprint(i)})
	}
	ts, err := b.Reserve(ctx, "conc", 5, 0)
	must(t, "reserve 5", err)
	if len(ts) != 2 {
		t.Fatalf("reserve max 5 under a concurrency of 2: %d tasks", len(ts))
	}
	reserveWaits(t, b, "conc", 100*time.Millisecond)
	if _, ok, err := b.ReserveAny(ctx, []string{"conc"}, 0); ok || err != nil {
		t.Fatalf("ReserveAny at the concurrency limit: %v, %v", ok, err)
	}
	other := putTask(t, b, "conc-other", task.PutRequest{ID: "o"})
	ts2, err := b.ReserveQueues(ctx, []string{"conc", "conc-other"}, 5, 0)
	must(t, "reserve over two queues", err)
	if len(ts2) != 1 || ts2[0].ID != other.ID || ts2[0].Queue != "conc-other" {
		t.Fatalf("reserve over a queue at its limit and another: %+v; want o alone", ts2)
	}
	must(t, "ack", b.Ack(ctx, "conc", ts[0].ID, ts[0].Lease))
	more, err := b.Reserve(ctx, "conc", 5, 0)
	must(t, "reserve after an ack", err)
	if len(more) != 1 {
		t.Fatalf("reserve after an ack: %d tasks; want 1", len(more))
	}
	// A nack frees a place too, and a reserver waiting gets it.
	got := make(chan []task.Task, 1)
	go func() {
		ts, _ := b.Reserve(ctx, "conc", 5, lateSlack)
		got <- ts
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case ts := <-got:
		t.Fatalf("a waiting reserve got %d tasks at the concurrency limit", len(ts))
	default:
	}
	_, err = b.Nack(ctx, "conc", more[0].ID, more[0].Lease, 0, "")
	must(t, "nack", err)
	if ts := <-got; len(ts) != 1 {
		t.Fatalf("the waiting reserve got %d tasks after a nack; want 1", len(ts))
	}

	// Reservers at once never hold more than 2.
	holdAtMost(t, []service.Service{b}, "conc-many", 2)
}

// holdAtMost puts 30 tasks into queue, sets its concurrency limit to
// limit, and has 6 reservers, spread over svcs (handles of one
// service), reserve and ack them all; it fails t if they ever held more
// than limit at once, or did not ack them all within 15 s.
func holdAtMost(t *testing.T, svcs []service.Service, queue string, limit int) {
	t.Helper()
	ctx := context.Background()
	setPolicy(t, svcs[0], queue, task.Policy{Concurrency: limit})
	const total = 30
	for i := range total {
		putTask(t, svcs[0], queue, task.PutRequest{ID: fmt.Sprint(i)})
	}
	var held, peak, done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	deadline := time.Now().Add(15 * time.Second)
	for i := range 6 {
		s := svcs[i%len(svcs)]
		wg.Go(func() {
			for done.Load() < total && time.Now().Before(deadline) {
				ts, err := s.Reserve(ctx, queue, limit, 100*time.Millisecond)
				if err != nil {
					errs <- err
					return
				}
				// Counted from after Reserve to before Ack: never more
				// than the service holds.
				h := held.Add(int64(len(ts)))
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				for _, tk := range ts {
					held.Add(-1)
					if err := s.Ack(ctx, queue, tk.ID, tk.Lease); err != nil {
						errs <- err
						return
					}
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%d reservers over %d handles: %v", 6, len(svcs), err)
	}
	if p := peak.Load(); p > int64(limit) {
		t.Fatalf("%d reservers over %d handles held %d tasks at once; limit %d", 6, len(svcs), p, limit)
	}
	if d := done.Load(); d != total {
		t.Fatalf("%d reservers over %d handles acked %d of %d tasks in 15s", 6, len(svcs), d, total)
	}
}

// concurrencyFreed: whatever ends a reservation frees its place under a
// concurrency limit (ack, nack, delete, bury, release, by id or by job,
// a lease running out), and tasks reserved before the limit was set
// count.
func concurrencyFreed(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "freed", task.Policy{Concurrency: 1})
	for i := range 10 {
		putTask(t, b, "freed", task.PutRequest{ID: fmt.Sprint(i)})
	}
	ends := []struct {
		name string
		end  func(r task.Task) error
	}{
		{"ack", func(r task.Task) error { return b.Ack(ctx, "freed", r.ID, r.Lease) }},
		{"nack", func(r task.Task) error { _, err := b.Nack(ctx, "freed", r.ID, r.Lease, time.Hour, ""); return err }},
		{"delete", func(r task.Task) error { return b.Delete(ctx, "freed", r.ID) }},
		{"bury", func(r task.Task) error { _, err := b.Bury(ctx, "freed", r.ID, r.Lease, ""); return err }},
		{"release", func(r task.Task) error { _, err := b.Release(ctx, "freed", r.ID, r.Lease, time.Hour); return err }},
		{"delete-job", func(r task.Task) error { return b.DeleteJob(ctx, r.JobID, r.Lease) }},
		{"release-job", func(r task.Task) error { return b.ReleaseJob(ctx, r.JobID, r.Lease, 1, time.Hour) }},
		{"bury-job", func(r task.Task) error { return b.BuryJob(ctx, r.JobID, r.Lease, 1) }},
	}
	r := ReserveOne(t, b, "freed", time.Second)
	for _, e := range ends {
		reserveNone(t, b, "freed", 0)
		must(t, e.name, e.end(r))
		ts, err := b.Reserve(ctx, "freed", 5, 0)
		must(t, "reserve after "+e.name, err)
		if len(ts) != 1 {
			t.Fatalf("reserve under a concurrency of 1 after %s: %d tasks; want 1", e.name, len(ts))
		}
		r = ts[0]
	}

	// A lease running out: a reserver waiting gets a task then.
	setPolicy(t, b, "freed-expiry", task.Policy{Concurrency: 1, TTR: 100 * time.Millisecond})
	putTask(t, b, "freed-expiry", task.PutRequest{ID: "a"})
	putTask(t, b, "freed-expiry", task.PutRequest{ID: "b"})
	r = ReserveOne(t, b, "freed-expiry", time.Second)
	ReserveOne(t, b, "freed-expiry", 100*time.Millisecond+lateSlack)
	if now := time.Now(); now.Before(r.LeaseUntil.Add(-timeSlack)) {
		t.Fatalf("a second task %v before the first's lease ran out, under a concurrency of 1", r.LeaseUntil.Sub(now))
	}

	// Reserved before the limit: they count.
	for i := range 6 {
		putTask(t, b, "freed-before", task.PutRequest{ID: fmt.Sprint(i)})
	}
	held, err := b.Reserve(ctx, "freed-before", 2, 0)
	must(t, "reserve 2 without a limit", err)
	if len(held) != 2 {
		t.Fatalf("reserve 2 without a limit: %d", len(held))
	}
	setPolicy(t, b, "freed-before", task.Policy{Concurrency: 1})
	reserveNone(t, b, "freed-before", 0)
	must(t, "ack", b.Ack(ctx, "freed-before", held[0].ID, held[0].Lease))
	reserveNone(t, b, "freed-before", 0)
	must(t, "ack", b.Ack(ctx, "freed-before", held[1].ID, held[1].Lease))
	r = ReserveOne(t, b, "freed-before", 0)
	// Loosening the limit, then deleting the policy, lets a reserver
	// waiting take a task.
	for _, loosen := range []struct {
		name string
		do   func() error
	}{
		{"a concurrency of 2", func() error {
			_, err := b.SetPolicy(ctx, "freed-before", task.Policy{Concurrency: 2})
			return err
		}},
		{"the policy deleted", func() error { return b.DeletePolicy(ctx, "freed-before") }},
	} {
		got := make(chan []task.Task, 1)
		go func() {
			ts, _ := b.Reserve(ctx, "freed-before", 1, 2*lateSlack)
			got <- ts
		}()
		time.Sleep(50 * time.Millisecond)
		select {
		case ts := <-got:
			t.Fatalf("a reserve at the concurrency limit got %d tasks", len(ts))
		default:
		}
		loosened := time.Now()
		must(t, loosen.name, loosen.do())
		if ts := <-got; len(ts) != 1 {
			t.Fatalf("a reserver waiting got %d tasks after %s; want 1", len(ts), loosen.name)
		}
		if since := time.Since(loosened); since > lateSlack {
			t.Fatalf("a reserver waiting got its task %v after %s", since, loosen.name)
		}
	}
}

// pauseWakes: a reserver waiting on a paused queue gets its task when the
// queue is resumed.
func pauseWakes(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "pause-wakes", task.PutRequest{ID: "a"})
	must(t, "pause", b.PauseQueue(ctx, "pause-wakes", task.PauseIndefinitely))
	got := make(chan []task.Task, 1)
	go func() {
		ts, _ := b.Reserve(ctx, "pause-wakes", 1, 2*lateSlack)
		got <- ts
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case ts := <-got:
		t.Fatalf("a reserve of a paused queue got %d tasks", len(ts))
	default:
	}
	resumed := time.Now()
	must(t, "resume", b.PauseQueue(ctx, "pause-wakes", 0))
	if ts := <-got; len(ts) != 1 {
		t.Fatalf("the waiting reserve got %d tasks after the resume; want 1", len(ts))
	}
	if since := time.Since(resumed); since > lateSlack {
		t.Fatalf("the waiting reserve got its task %v after the resume", since)
	}
}

// rate: a queue's tasks handed out at most burst + limit × elapsed / per;
// a reserve waiting gets a task when its token is due.
func rate(t *testing.T, b service.Service) {
	ctx := context.Background()
	const limit, per, total = 5, 500 * time.Millisecond, 20
	every := per / limit // a token each 100 ms
	setPolicy(t, b, "rate", task.Policy{Rate: &task.Rate{Limit: limit, Per: per}})
	for i := range total {
		putTask(t, b, "rate", task.PutRequest{ID: fmt.Sprint(i)})
	}
	start := time.Now()
	ts, err := b.Reserve(ctx, "rate", total, 0)
	must(t, "reserve 20", err)
	got := len(ts)
	// The bound over [start, now]: burst + limit × elapsed / per.
	allowed := func() int { return limit + int((time.Since(start)+timeSlack)/every) }
	if a := allowed(); got < limit || got > a {
		t.Fatalf("first reserve under a rate of 5/500ms: %d tasks in %v; want the burst of 5 (at most %d)", got, time.Since(start), a)
	}

	// The next token is due 100 ms after the burst was taken: a reserve
	// waiting gets it then, not before.
	ts, err = b.Reserve(ctx, "rate", 1, every+lateSlack)
	must(t, "reserve waiting for a token", err)
	if len(ts) != 1 {
		t.Fatalf("reserve waiting for a token: %d tasks; want 1", len(ts))
	}
	got++
	if a := allowed(); got > a {
		t.Fatalf("%d tasks in %v; a rate of 5/500ms allows %d", got, time.Since(start), a)
	}
	for got < total && time.Since(start) < 10*time.Second {
		ts, err := b.Reserve(ctx, "rate", total, time.Second)
		must(t, "reserve", err)
		got += len(ts)
		if a := allowed(); got > a {
			t.Fatalf("%d tasks handed out in %v; a rate of 5/500ms allows %d", got, time.Since(start), a)
		}
	}
	if got != total {
		t.Fatalf("%d of %d tasks in 10s under a rate of 5/500ms", got, total)
	}
	// 15 tokens after the burst take 1.5 s at least.
	if since := time.Since(start); since < 15*every-timeSlack {
		t.Fatalf("%d tasks in %v; want %v or more", total, since, 15*every)
	}

	// Over several queues, each its own limit.
	setPolicy(t, b, "rate-slow", task.Policy{Rate: &task.Rate{Limit: 1, Per: time.Hour}})
	for i := range 3 {
		putTask(t, b, "rate-slow", task.PutRequest{ID: fmt.Sprint(i)})
		putTask(t, b, "rate-free", task.PutRequest{ID: fmt.Sprint(i)})
	}
	ts, err = b.ReserveQueues(ctx, []string{"rate-slow", "rate-free"}, 10, 0)
	must(t, "reserve over two queues", err)
	slow := 0
	for _, tk := range ts {
		if tk.Queue == "rate-slow" {
			slow++
		}
	}
	if slow != 1 || len(ts) != 4 {
		t.Fatalf("reserve over a queue of 1 an hour and a free one: %d tasks, %d of the slow one; want 4, 1", len(ts), slow)
	}
	if _, ok, err := b.ReserveAny(ctx, []string{"rate-slow"}, 0); ok || err != nil {
		t.Fatalf("ReserveAny of a queue out of tokens: %v, %v", ok, err)
	}
	reserveWaits(t, b, "rate-slow", 100*time.Millisecond)
}

// rateTokens: a token is spent only on a task handed out: not by a
// reserve of an empty queue, a paused one, or one at its concurrency
// limit, nor for more tasks than were ready.
func rateTokens(t *testing.T, b service.Service) {
	ctx := context.Background()
	hourly := func(n int) *task.Rate { return &task.Rate{Limit: n, Per: time.Hour} }
	count := func(queue string, max int) int {
		t.Helper()
		ts, err := b.Reserve(ctx, queue, max, 0)
		must(t, "reserve "+queue, err)
		for _, tk := range ts {
			must(t, "ack", b.Ack(ctx, queue, tk.ID, tk.Lease))
		}
		return len(ts)
	}
	puts := func(queue string, n int) {
		t.Helper()
		for range n {
			putTask(t, b, queue, task.PutRequest{})
		}
	}

	setPolicy(t, b, "tokens-empty", task.Policy{Rate: hourly(1)})
	if n := count("tokens-empty", 5); n != 0 {
		t.Fatalf("reserve of an empty queue: %d", n)
	}
	reserveNone(t, b, "tokens-empty", 50*time.Millisecond)
	puts("tokens-empty", 2)
	if n := count("tokens-empty", 5); n != 1 {
		t.Fatalf("reserve under 1 an hour after reserves of the empty queue: %d tasks; want 1", n)
	}

	setPolicy(t, b, "tokens-burst", task.Policy{Rate: &task.Rate{Limit: 5, Per: time.Hour, Burst: 2}})
	puts("tokens-burst", 5)
	if n := count("tokens-burst", 5); n != 2 {
		t.Fatalf("reserve under 5 an hour, burst 2: %d tasks; want 2", n)
	}

	setPolicy(t, b, "tokens-few", task.Policy{Rate: hourly(5)})
	puts("tokens-few", 2)
	if n := count("tokens-few", 5); n != 2 {
		t.Fatalf("reserve of 2 ready under 5 an hour: %d tasks", n)
	}
	puts("tokens-few", 5)
	if n := count("tokens-few", 5); n != 3 {
		t.Fatalf("reserve after 2 of 5 tokens spent: %d tasks; want 3", n)
	}

	setPolicy(t, b, "tokens-paused", task.Policy{Rate: hourly(2)})
	puts("tokens-paused", 3)
	must(t, "pause", b.PauseQueue(ctx, "tokens-paused", task.PauseIndefinitely))
	if n := count("tokens-paused", 5); n != 0 {
		t.Fatalf("reserve of a paused queue: %d", n)
	}
	reserveNone(t, b, "tokens-paused", 50*time.Millisecond)
	must(t, "resume", b.PauseQueue(ctx, "tokens-paused", 0))
	if n := count("tokens-paused", 5); n != 2 {
		t.Fatalf("reserve under 2 an hour after reserves of the queue paused: %d tasks; want 2", n)
	}

	// A reserver waiting for a token takes a task when a policy raises
	// the rate or is deleted.
	setPolicy(t, b, "tokens-loosened", task.Policy{Rate: hourly(1)})
	puts("tokens-loosened", 5)
	if n := count("tokens-loosened", 5); n != 1 {
		t.Fatalf("reserve under 1 an hour: %d tasks", n)
	}
	for _, loosen := range []struct {
		name string
		do   func() error
	}{
		{"a rate of 1000/s", func() error {
			_, err := b.SetPolicy(ctx, "tokens-loosened", task.Policy{Rate: &task.Rate{Limit: 1000, Per: time.Second, Burst: 1}})
			return err
		}},
		{"the policy deleted", func() error { return b.DeletePolicy(ctx, "tokens-loosened") }},
	} {
		if loosen.name == "the policy deleted" {
			// A new rate may start with a full bucket or not; spend it.
			setPolicy(t, b, "tokens-loosened", task.Policy{Rate: hourly(1)})
			if n := count("tokens-loosened", 5); n > 1 {
				t.Fatalf("reserve under a new rate of 1 an hour: %d tasks", n)
			}
		}
		got := make(chan []task.Task, 1)
		go func() {
			ts, _ := b.Reserve(ctx, "tokens-loosened", 1, 2*lateSlack)
			got <- ts
		}()
		time.Sleep(50 * time.Millisecond)
		select {
		case ts := <-got:
			t.Fatalf("a reserve out of tokens got %d tasks", len(ts))
		default:
		}
		loosened := time.Now()
		must(t, loosen.name, loosen.do())
		ts := <-got
		if len(ts) != 1 {
			t.Fatalf("a reserver waiting for a token got %d tasks after %s; want 1", len(ts), loosen.name)
		}
		if since := time.Since(loosened); since > lateSlack {
			t.Fatalf("a reserver waiting for a token got its task %v after %s", since, loosen.name)
		}
		must(t, "ack", b.Ack(ctx, "tokens-loosened", ts[0].ID, ts[0].Lease))
	}

	setPolicy(t, b, "tokens-conc", task.Policy{Rate: hourly(2), Concurrency: 1})
	puts("tokens-conc", 3)
	for i := range 2 {
		if n := count("tokens-conc", 5); n != 1 {
			t.Fatalf("reserve %d under 2 an hour and a concurrency of 1: %d tasks; want 1", i+1, n)
		}
	}
	if n := count("tokens-conc", 5); n != 0 {
		t.Fatalf("reserve after 2 tokens spent: %d tasks; want 0", n)
	}
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

	// Deleted: ready at once again.
	must(t, "delete the policy", b.DeletePolicy(ctx, "late"))
	r = ReserveOne(t, b, "late", time.Second)
	n, err = b.Nack(ctx, "late", r.ID, r.Lease, task.RetryDelay, "")
	must(t, "nack after the policy's deletion", err)
	if n.State != task.Ready {
		t.Fatalf("nack after the policy's deletion = %+v; want ready", n)
	}
}

// RunPoliciesAcross runs the part of the policies' suite that holds
// across a whole service over two handles of one service that open
// returns (two nodes of one cluster; the same broker twice): a policy or
// a pause set through one applies through the other, and the
// concurrency and rate limits hold over reservers on both.
func RunPoliciesAcross(t *testing.T, open func(t *testing.T) (a, b service.Service)) {
	a, b := open(t)
	t.Run("policy", func(t *testing.T) { policyAcross(t, a, b) })
	t.Run("pause", func(t *testing.T) { pauseAcross(t, a, b) })
	t.Run("concurrency", func(t *testing.T) { concurrencyAcross(t, a, b) })
	t.Run("rate", func(t *testing.T) { rateAcross(t, a, b) })
}

// policyAcross: a policy set through a is b's, and deleted through b is
// a's no more.
func policyAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	p := setPolicy(t, a, "across", task.Policy{TTR: 7 * time.Second, MaxAttempts: 2, DeadLetter: "across-dead"})
	got, err := b.Policy(ctx, "across")
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("Policy through the other = %s, %v; want %s", showPolicy(got), err, showPolicy(p))
	}
	if s, ok := queueStats(t, b, "across"); !ok || !reflect.DeepEqual(s.Policy, p) {
		t.Fatalf("Queues through the other: %v, %+v", ok, s)
	}
	x := putTask(t, b, "across", task.PutRequest{ID: "x", MaxAttempts: 1})
	y := putTask(t, b, "across", task.PutRequest{ID: "y"})
	if y.TTR != 7*time.Second || y.MaxAttempts != 2 || x.MaxAttempts != 1 {
		t.Fatalf("put through the other: ttr %v, max_attempts %d; want the policy's 7s, 2", y.TTR, y.MaxAttempts)
	}
	r := ReserveOne(t, b, "across", time.Second)
	n, err := b.Nack(ctx, "across", r.ID, r.Lease, 0, "e")
	must(t, "nack through the other", err)
	if n.Queue != "across-dead" {
		t.Fatalf("last failure through the other = %+v; want moved to across-dead", n)
	}
	must(t, "delete the policy through the other", b.DeletePolicy(ctx, "across"))
	if got, err := a.Policy(ctx, "across"); err != nil || !got.IsZero() {
		t.Fatalf("Policy after the other deleted it = %s, %v", showPolicy(got), err)
	}
	z := putTask(t, a, "across", task.PutRequest{ID: "z"})
	if z.TTR != task.DefaultTTR || z.MaxAttempts != 0 {
		t.Fatalf("put after the other deleted the policy: ttr %v, max_attempts %d", z.TTR, z.MaxAttempts)
	}
}

// pauseAcross: a pause through a holds through b, and a resume through
// b wakes a reserver waiting on a.
func pauseAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	putTask(t, a, "across-paused", task.PutRequest{ID: "x"})
	must(t, "pause", a.PauseQueue(ctx, "across-paused", task.PauseIndefinitely))
	reserveNone(t, b, "across-paused", 50*time.Millisecond)
	if s, _ := queueStats(t, b, "across-paused"); !s.PausedUntil.Equal(task.PausedForever) {
		t.Fatalf("pause seen through the other: PausedUntil %v", s.PausedUntil)
	}
	got := make(chan []task.Task, 1)
	go func() {
		ts, _ := a.Reserve(ctx, "across-paused", 1, 2*lateSlack)
		got <- ts
	}()
	time.Sleep(50 * time.Millisecond)
	resumed := time.Now()
	must(t, "resume through the other", b.PauseQueue(ctx, "across-paused", 0))
	if ts := <-got; len(ts) != 1 {
		t.Fatalf("a reserver waiting on one got %d tasks after a resume through the other", len(ts))
	}
	if since := time.Since(resumed); since > lateSlack {
		t.Fatalf("a reserver waiting on one got its task %v after a resume through the other", since)
	}
}

// concurrencyAcross: reservers on both never hold more than the limit,
// and a place freed through one wakes a reserver waiting on the other.
func concurrencyAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	setPolicy(t, a, "across-wake", task.Policy{Concurrency: 1})
	putTask(t, a, "across-wake", task.PutRequest{ID: "x"})
	putTask(t, a, "across-wake", task.PutRequest{ID: "y"})
	x := ReserveOne(t, a, "across-wake", time.Second)
	got := make(chan []task.Task, 1)
	go func() {
		ts, _ := b.Reserve(ctx, "across-wake", 1, 2*lateSlack)
		got <- ts
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case ts := <-got:
		t.Fatalf("a reserve on the other got %d tasks at the concurrency limit", len(ts))
	default:
	}
	acked := time.Now()
	must(t, "ack", a.Ack(ctx, "across-wake", x.ID, x.Lease))
	if ts := <-got; len(ts) != 1 {
		t.Fatalf("a reserver waiting on the other got %d tasks after an ack; want 1", len(ts))
	}
	if since := time.Since(acked); since > lateSlack {
		t.Fatalf("a reserver waiting on the other got its task %v after the ack", since)
	}

	holdAtMost(t, []service.Service{a, b}, "across-conc", 2)
}

// rateAcross: reservers on both are handed out no more than burst +
// limit × elapsed / per between them.
func rateAcross(t *testing.T, a, b service.Service) {
	ctx := context.Background()
	const limit, per, total = 5, 500 * time.Millisecond, 20
	every := per / limit
	setPolicy(t, a, "across-rate", task.Policy{Rate: &task.Rate{Limit: limit, Per: per}})
	for i := range total {
		putTask(t, a, "across-rate", task.PutRequest{ID: fmt.Sprint(i)})
	}
	var got atomic.Int64
	var over atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	for i := range 4 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for got.Load() < total && time.Now().Before(deadline) {
				ts, err := s.Reserve(ctx, "across-rate", total, 300*time.Millisecond)
				if err != nil {
					over.CompareAndSwap(nil, err.Error())
					return
				}
				n := got.Add(int64(len(ts)))
				since := time.Since(start)
				if allowed := int64(limit) + int64((since+timeSlack)/every); n > allowed {
					over.CompareAndSwap(nil, fmt.Sprintf("%d tasks handed out in %v; a rate of 5/500ms allows %d", n, since, allowed))
				}
			}
		})
	}
	wg.Wait()
	if msg := over.Load(); msg != nil {
		t.Fatalf("reservers on both: %s", msg)
	}
	if n := got.Load(); n != total {
		t.Fatalf("reservers on both got %d of %d tasks in 10s", n, total)
	}
}

// RunPoliciesOrder runs over the service open returns the test that a
// reserve over several queues hands out in delivery order across them
// whatever their limits (Tasks.ReserveQueues, Jobs.ReserveAny): a queue
// with a rate or concurrency limit within it does not lose its place to
// one without.
func RunPoliciesOrder(t *testing.T, open func(t *testing.T) service.Service) {
	b := open(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    task.Policy
	}{
		{"concurrency", task.Policy{Concurrency: 5}},
		{"rate", task.Policy{Rate: &task.Rate{Limit: 5, Per: time.Second}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			limited, free := "order-"+c.name, "order-free-"+c.name
			setPolicy(t, b, limited, c.p)
			putTask(t, b, free, task.PutRequest{ID: "f1", Priority: 10})
			putTask(t, b, free, task.PutRequest{ID: "f2", Priority: 10})
			putTask(t, b, limited, task.PutRequest{ID: "l1", Priority: 1})
			putTask(t, b, limited, task.PutRequest{ID: "l2", Priority: 20})
			ts, err := b.ReserveQueues(ctx, []string{free, limited}, 2, 0)
			must(t, "reserve over two queues", err)
			if len(ts) != 2 || ts[0].ID != "l1" || ts[1].ID != "f1" {
				t.Fatalf("reserve of 2 over a queue with a %s limit and one without: %s; want l1 (priority 1), then f1 (10)", c.name, ids(ts))
			}
			tk, ok, err := b.ReserveAny(ctx, []string{free, limited}, 0)
			if err != nil || !ok || tk.ID != "f2" {
				t.Fatalf("ReserveAny = %s/%s, %v, %v; want f2 (priority 10 before 20)", tk.Queue, tk.ID, ok, err)
			}
			tk, ok, err = b.ReserveAny(ctx, []string{free, limited}, 0)
			if err != nil || !ok || tk.ID != "l2" {
				t.Fatalf("ReserveAny = %s/%s, %v, %v; want l2", tk.Queue, tk.ID, ok, err)
			}
		})
	}
}

// ids lists tasks as queue/id, priority, for a message.
func ids(ts []task.Task) string {
	var s []string
	for _, tk := range ts {
		s = append(s, fmt.Sprintf("%s/%s (priority %d)", tk.Queue, tk.ID, tk.Priority))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
