package servicetest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The policies' suite, pauses and the rate and concurrency limits.

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
	got := waitingReserve(t, b, "conc", 5, lateSlack, 50*time.Millisecond, "a waiting reserve got %d tasks at the concurrency limit")
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
		got := waitingReserve(t, b, "freed-before", 1, 2*lateSlack, 50*time.Millisecond, "a reserve at the concurrency limit got %d tasks")
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
	got := waitingReserve(t, b, "pause-wakes", 1, 2*lateSlack, 100*time.Millisecond, "a reserve of a paused queue got %d tasks")
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
	allowed := func() int { return limit + int((sinceEither(start)+timeSlack)/every) }
	if a := allowed(); got < limit || got > a {
		t.Fatalf("first reserve under a rate of 5/500ms: %d tasks in %v; want the burst of 5 (at most %d)", got, sinceEither(start), a)
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
		t.Fatalf("%d tasks in %v; a rate of 5/500ms allows %d", got, sinceEither(start), a)
	}
	for got < total && sinceEither(start) < 10*time.Second {
		ts, err := b.Reserve(ctx, "rate", total, time.Second)
		must(t, "reserve", err)
		got += len(ts)
		if a := allowed(); got > a {
			t.Fatalf("%d tasks handed out in %v; a rate of 5/500ms allows %d", got, sinceEither(start), a)
		}
	}
	if got != total {
		t.Fatalf("%d of %d tasks in 10s under a rate of 5/500ms", got, total)
	}
	// 15 tokens after the burst take 1.5 s at least.
	if since := sinceEither(start); since < 15*every-timeSlack {
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
		got := waitingReserve(t, b, "tokens-loosened", 1, 2*lateSlack, 50*time.Millisecond, "a reserve out of tokens got %d tasks")
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
