package servicetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The policies' suite, what becomes of a failed attempt: Nack's answer,
// back-off, lease expiry, Release, Bury and dead-letter queues.

// failureAnswers: what Touch, Nack, Release and Bury answer is the task
// as it is after, the same on every engine: Touch's with its payload (a
// worker renewing a lease holds the task), the other three without it
// (the task has left the worker; Get has it).
func failureAnswers(t *testing.T, b service.Service) {
	ctx := context.Background()
	putTask(t, b, "answers", task.PutRequest{ID: "a", Payload: []byte(`{"k":1}`), MaxAttempts: 5})
	r := ReserveOne(t, b, "answers", time.Second)
	tk, err := b.Touch(ctx, "answers", "a", r.Lease)
	must(t, "touch", err)
	if string(tk.Payload) != `{"k":1}` || tk.State != task.Reserved {
		t.Errorf("Touch = %s, %s; want reserved with its payload", tk.State, tk.Payload)
	}
	for _, c := range []struct {
		name  string
		state task.State
		call  func(lease string) (task.Task, error)
	}{
		{"nack", task.Ready, func(l string) (task.Task, error) { return b.Nack(ctx, "answers", "a", l, 0, "e") }},
		{"release", task.Ready, func(l string) (task.Task, error) { return b.Release(ctx, "answers", "a", l, 0) }},
		{"bury", task.Dead, func(l string) (task.Task, error) { return b.Bury(ctx, "answers", "a", l, "e") }},
	} {
		if c.name != "nack" { // the nack takes the touched reservation
			r = ReserveOne(t, b, "answers", time.Second)
		}
		tk, err := c.call(r.Lease)
		must(t, c.name, err)
		if tk.Payload != nil || tk.State != c.state || tk.ID != "a" {
			t.Errorf("%s = %s, payload %q; want %s without its payload", c.name, tk.State, tk.Payload, c.state)
		}
	}
	if g, err := b.Get("answers", "a"); err != nil || string(g.Payload) != `{"k":1}` {
		t.Errorf("Get after the bury = %q, %v; want its payload", g.Payload, err)
	}
}

// deadOrder: a queue's dead tasks are taken oldest death first (Peek,
// KickQueue, the history of DeleteDead), a task that died, was kicked (or
// reserved by job id) and died again at its second death.
func deadOrder(t *testing.T, b service.Service) {
	ctx := context.Background()
	die := func(id string) {
		t.Helper()
		r := ReserveOne(t, b, "dead-order", time.Second)
		if r.ID != id {
			t.Fatalf("reserved %s, want %s", r.ID, id)
		}
		_, err := b.Bury(ctx, "dead-order", id, r.Lease, "")
		must(t, "bury "+id, err)
	}
	putTask(t, b, "dead-order", task.PutRequest{ID: "a"})
	putTask(t, b, "dead-order", task.PutRequest{ID: "b"})
	die("a")
	die("b")
	must(t, "kick a", b.Kick(ctx, "dead-order", "a"))
	die("a")
	if p, err := b.Peek("dead-order", task.Dead); err != nil || p.ID != "b" {
		t.Fatalf("Peek dead = %s, %v; want b, which died before a's second death", p.ID, err)
	}
	// b, reserved by job id while dead (beanstalkd's reserve-job) and
	// buried again, now died after a.
	g, err := b.Get("dead-order", "b")
	must(t, "get b", err)
	r, err := b.ReserveJob(ctx, g.JobID)
	must(t, "reserve b by job id", err)
	must(t, "bury b by job id", b.BuryJob(ctx, g.JobID, r.Lease, task.DefaultPriority))
	if p, err := b.Peek("dead-order", task.Dead); err != nil || p.ID != "a" {
		t.Fatalf("Peek dead = %s, %v; want a, which died before b's second death", p.ID, err)
	}
	n, err := b.KickQueue(ctx, "dead-order", 1)
	must(t, "kick 1", err)
	if g, _ := b.Get("dead-order", "a"); n != 1 || g.State != task.Ready {
		t.Fatalf("KickQueue 1 = %d, a %s; want a kicked first", n, g.State)
	}
}

// jobOrder: a task reserved by its job id (beanstalkd's reserve-job)
// and released comes back at its new place in the order (due now, after
// the tasks that were ready before), not at its old one.
func jobOrder(t *testing.T, b service.Service) {
	ctx := context.Background()
	a := putTask(t, b, "job-order", task.PutRequest{ID: "a"})
	putTask(t, b, "job-order", task.PutRequest{ID: "b"})
	r, err := b.ReserveJob(ctx, a.JobID)
	must(t, "reserve a by job id", err)
	must(t, "release a", b.ReleaseJob(ctx, a.JobID, r.Lease, task.DefaultPriority, 0))
	if p, err := b.Peek("job-order", task.Ready); err != nil || p.ID != "b" {
		t.Fatalf("Peek ready = %s, %v; want b, ready before a was released", p.ID, err)
	}
	for _, want := range []string{"b", "a"} {
		if r := ReserveOne(t, b, "job-order", time.Second); r.ID != want {
			t.Fatalf("reserved %s, want %s", r.ID, want)
		}
	}
}

// nackPolicy: Nack's answer, its reason kept, the retry policy's delay
// or the caller's, death at the last attempt.
func nackPolicy(t *testing.T, b service.Service) {
	ctx := context.Background()

	// Without a policy: back after the default back-off's first delay,
	// 1s ± 10%, not at once; the reason kept.
	putTask(t, b, "nack-default", task.PutRequest{ID: "d"})
	r := ReserveOne(t, b, "nack-default", time.Second)
	t0 := time.Now()
	n, err := b.Nack(ctx, "nack-default", "d", r.Lease, task.RetryDelay, "boom")
	t1 := time.Now()
	must(t, "nack without a policy", err)
	if n.State != task.Delayed || n.LastError != "boom" || n.Attempts != 1 || n.MaxAttempts != service.DefaultMaxAttempts {
		t.Fatalf("Nack without a policy = %+v; want delayed, last error boom, attempts 1 of %d", n, service.DefaultMaxAttempts)
	}
	lo, hi := 900*time.Millisecond, 1100*time.Millisecond
	dueWithin(t, "due after a nack without a policy", n.Due, t0.Add(lo), t1.Add(hi))
	reserveNone(t, b, "nack-default", lo/2)
	r = ReserveOne(t, b, "nack-default", hi+lateSlack)
	within(t, "reserve after the default back-off", time.Now(), t0.Add(lo), t1.Add(hi))
	// Its second failure waits twice as long.
	t0 = time.Now()
	n, err = b.Nack(ctx, "nack-default", "d", r.Lease, task.RetryDelay, "")
	t1 = time.Now()
	must(t, "second nack without a policy", err)
	dueWithin(t, "due after a second nack without a policy", n.Due, t0.Add(2*lo), t1.Add(2*hi))

	// An explicit immediate retry policy (initial 0s): ready at once; the
	// reason kept, cut and made valid.
	setPolicy(t, b, "nack", task.Policy{Retry: &task.Retry{}})
	putTask(t, b, "nack", task.PutRequest{ID: "a", MaxAttempts: 5})
	r = ReserveOne(t, b, "nack", time.Second)
	n, err = b.Nack(ctx, "nack", "a", r.Lease, task.RetryDelay, "boom")
	must(t, "nack", err)
	if n.State != task.Ready || n.ID != "a" || n.Queue != "nack" || n.LastError != "boom" || n.Attempts != 1 {
		t.Fatalf("Nack under immediate retries = %+v; want a ready, last error boom, attempts 1", n)
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
	t0 = time.Now()
	n, err = b.Nack(ctx, "nack", "a", r.Lease, 200*time.Millisecond, "later")
	t1 = time.Now()
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

	// Without a policy a task dies at its 25th failure (each nacked here
	// with a delay of 0, the caller's, which wins over the back-off).
	putTask(t, b, "nack-dies", task.PutRequest{ID: "e"})
	for i := 1; i <= service.DefaultMaxAttempts; i++ {
		r = ReserveOne(t, b, "nack-dies", time.Second)
		n, err = b.Nack(ctx, "nack-dies", "e", r.Lease, 0, "again")
		must(t, "nack e", err)
		if dead := i == service.DefaultMaxAttempts; (n.State == task.Dead) != dead || n.State != task.Dead && n.State != task.Ready {
			t.Fatalf("nack %d of e without a policy = %+v; want dead only at %d", i, n, service.DefaultMaxAttempts)
		}
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

// leaseExpiryDefault: without a retry policy a lease that runs out makes
// its task ready again at once, in its place, as beanstalkd does
// (service.ExpiryDelay), not after the default back-off; the attempt
// counts against the default max_attempts.
func leaseExpiryDefault(t *testing.T, b service.Service) {
	const ttr = 100 * time.Millisecond
	putTask(t, b, "expiry-default", task.PutRequest{ID: "x", TTR: ttr})
	r := ReserveOne(t, b, "expiry-default", time.Second)
	d := waitGone(t, b, "expiry-default", "x", ttr)
	if d.State != task.Ready || d.LastError != task.LeaseExpired || d.Timeouts != 1 || d.MaxAttempts != service.DefaultMaxAttempts {
		t.Fatalf("task after its lease ran out, without a policy = %+v; want ready at once, last error %q, of %d attempts",
			d, task.LeaseExpired, service.DefaultMaxAttempts)
	}
	if d.Due.After(r.LeaseUntil) {
		t.Fatalf("task due %v after its lease's end; want its place kept", d.Due.Sub(r.LeaseUntil))
	}
}

// leaseExpiryKeepsPlace: a lease that runs out in a queue whose policy
// makes its task ready again at once (a concurrency limit without a
// retry; a retry of initial 0s) keeps the task's due time, and so its
// place before the tasks put after it (service.Expired's KeepDue), as
// without a policy. A cluster settles these leases in settleExpired,
// not the flush.
func leaseExpiryKeepsPlace(t *testing.T, b service.Service) {
	const ttr = 100 * time.Millisecond
	for _, c := range []struct {
		queue string
		p     task.Policy
	}{
		{"expiry-place-limited", task.Policy{Concurrency: 1, TTR: ttr}},
		{"expiry-place-retry0", task.Policy{Retry: &task.Retry{}, TTR: ttr}},
	} {
		setPolicy(t, b, c.queue, c.p)
		first := putTask(t, b, c.queue, task.PutRequest{ID: "first"})
		time.Sleep(2 * time.Millisecond) // "second" due strictly later
		putTask(t, b, c.queue, task.PutRequest{ID: "second"})
		r := ReserveOne(t, b, c.queue, time.Second)
		if r.ID != "first" {
			t.Fatalf("%s: reserved %s; want first", c.queue, r.ID)
		}
		d := waitGone(t, b, c.queue, "first", ttr)
		if d.State != task.Ready || d.LastError != task.LeaseExpired || !d.Due.Equal(first.Due) {
			t.Fatalf("%s: after its lease ran out = %+v; want ready, last error %q, due %v kept (%v later)",
				c.queue, d, task.LeaseExpired, first.Due, d.Due.Sub(first.Due))
		}
		if r = ReserveOne(t, b, c.queue, time.Second); r.ID != "first" || r.Attempts != 2 {
			t.Fatalf("%s: reserved %s (attempts %d) after the lease ran out; want first again, in its place", c.queue, r.ID, r.Attempts)
		}
	}
}

// leaseExpiryBound: a lease that runs out in a queue without a retry
// back-off or a dead-letter queue (none at all, or one with a limit of
// attempts and a rate) ends as service.Expired decides over the task's
// counters, on every engine: below the task's attempt bound ready again
// at once, in its place; at the bound dead in its queue; never with
// unlimited attempts. Each step is compared field by field with the
// verdict, and the attempts and the finished record with it. A cluster
// settles these leases in its flush's one statement (cluster.sqlDies),
// the embedded engine by service.Expired itself.
func leaseExpiryBound(t *testing.T, b service.Service) {
	ctx := context.Background()
	const ttr = 100 * time.Millisecond
	for _, c := range []struct {
		queue  string
		p      task.Policy
		max    int // the put's max_attempts
		rounds int
	}{
		{"expiry-bound-none", task.Policy{}, 2, 2},
		{"expiry-bound-one", task.Policy{}, 1, 1},
		{"expiry-bound-policy", task.Policy{MaxAttempts: 3, Rate: &task.Rate{Limit: 1000, Per: time.Second}}, 0, 3},
		{"expiry-bound-unlimited", task.Policy{}, task.UnlimitedAttempts, 3},
	} {
		if !c.p.IsZero() {
			setPolicy(t, b, c.queue, c.p)
		}
		put := putTask(t, b, c.queue, task.PutRequest{ID: "x", TTR: ttr, MaxAttempts: c.max})
		for i := 1; i <= c.rounds; i++ {
			r := ReserveOne(t, b, c.queue, lateSlack)
			if r.ID != "x" || r.Attempts != i {
				t.Fatalf("%s: reservation %d = %s, attempts %d", c.queue, i, r.ID, r.Attempts)
			}
			v := service.Expired(service.Held{Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, Policy: c.p}, 0)
			d := waitGone(t, b, c.queue, "x", ttr)
			want := task.Ready
			if v.Dead {
				want = task.Dead
			}
			if d.State != want || d.Queue != c.queue || d.Attempts != i || d.Timeouts != i ||
				d.LastError != *v.LastError || v.KeepDue && !d.Due.Equal(put.Due) {
				t.Fatalf("%s: attempt %d of %d ran out = %+v; want as service.Expired decides: %s, attempts %d, timeouts %d, last error %q, due kept %v",
					c.queue, i, r.MaxAttempts, d, want, i, i, *v.LastError, v.KeepDue)
			}
			as, err := b.Attempts(ctx, c.queue, "x")
			must(t, "attempts", err)
			if len(as) != i || as[i-1].Attempt != i || as[i-1].Outcome != v.Attempt || as[i-1].Error != v.AttemptError {
				t.Fatalf("%s: attempts after %d ran out = %+v; want %d, the last %q with error %q", c.queue, i, as, i, v.Attempt, v.AttemptError)
			}
			if i == c.rounds && v.Dead != (c.rounds == c.max || c.max == 0) {
				t.Fatalf("%s: the rule's verdict on the last attempt: dead %v", c.queue, v.Dead)
			}
			if v.Dead {
				f, err := b.LastFinished(ctx, c.queue, "x")
				must(t, "last finished", err)
				if f.Outcome != task.FinishedDead || f.Attempts != i || f.LastError != *v.LastError {
					t.Fatalf("%s: finished = %+v; want dead after %d attempts, last error %q", c.queue, f, i, *v.LastError)
				}
			}
		}
	}
}

// deadLetterDue: a task moved to its dead-letter queue is ready there,
// due no later than its move, as a kick makes it: one delayed by an hour
// and reserved by its job id (beanstalkd's reserve-job) does not carry
// its due time an hour ahead into the dead-letter queue.
func deadLetterDue(t *testing.T, b service.Service) {
	ctx := context.Background()
	setPolicy(t, b, "dl-due", task.Policy{DeadLetter: "dl-due-dead"})
	p := putTask(t, b, "dl-due", task.PutRequest{ID: "d", Delay: time.Hour})
	r, err := b.ReserveJob(ctx, p.JobID)
	must(t, "reserve-job of a delayed task", err)
	n, err := b.Bury(ctx, "dl-due", "d", r.Lease, "x")
	must(t, "bury", err)
	if n.Queue != "dl-due-dead" || n.State != task.Ready || n.Due.After(time.Now().Add(dueSlack)) {
		t.Fatalf("buried into its dead-letter queue = %+v; want ready in dl-due-dead, due by now (%v ahead)",
			n, time.Until(n.Due))
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
	if page, _, err := b.FindTasks(ctx, "bury", service.Filter{State: task.Dead}, service.Cursor{}, 10); err != nil || len(page) != 1 || page[0].LastError != "poison" {
		t.Fatalf("FindTasks dead after Bury: %+v, %v; want x, last error poison", page, err)
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
// queue, ready, with its id, payload and last error, and no attempts,
// replacing a task of the same id there (deadLetterAttempts: what else it
// starts with there).
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
	if n.Queue != "dl-dead" || n.State != task.Ready || n.ID != "a" || n.Attempts != 0 || n.LastError != "e2" {
		t.Fatalf("Nack of the last attempt = %+v; want a, ready in dl-dead, attempts 0, last error e2", n)
	}
	_, err = b.Get("dl", "a")
	wantErr(t, "get from its own queue", err, task.ErrNotFound)
	g, err := b.Get("dl-dead", "a")
	must(t, "get from the dead-letter queue", err)
	if g.State != task.Ready || string(g.Payload) != `"pa"` || g.Attempts != 0 || g.LastError != "e2" || g.Queue != "dl-dead" {
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
	if g, err := b.Get("dl-dead", "b"); err != nil || string(g.Payload) != `"new"` || g.Attempts != 0 || g.LastError != "e" {
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
	if moved.ID != "e" || string(moved.Payload) != `"pe"` || moved.LastError != task.LeaseExpired || moved.Attempts != 1 {
		t.Fatalf("dead-lettered after its lease ran out: %+v; want e, last error %q, attempts 1 (its first in the dead-letter queue)", moved, task.LeaseExpired)
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
