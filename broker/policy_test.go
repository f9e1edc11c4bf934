package broker_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/store/pebblestore"
	"github.com/hourglass-go/hourglass/task"
)

func setPolicy(t *testing.T, b *broker.Broker, q string, p task.Policy) {
	t.Helper()
	if _, err := svc(b).SetPolicy(ctx, q, p); err != nil {
		t.Fatalf("set policy of %s: %v", q, err)
	}
}

func get(t *testing.T, b *broker.Broker, q, id string) task.Task {
	t.Helper()
	x, err := svc(b).Get(q, id)
	if err != nil {
		t.Fatalf("get %s/%s: %v", q, id, err)
	}
	return x
}

// TestPolicy_BackoffSpacing: each nack without a delay puts the task
// back after Initial × Multiplier^(attempts−1), within the jitter, capped
// at Max; it is not handed out before, and is soon after.
func TestPolicy_BackoffSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		setPolicy(t, b, "q", task.Policy{Retry: &task.Retry{
			Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond, Multiplier: 2, Jitter: 0.1}})
		put(t, b, "q", task.PutRequest{ID: "a"})
		for attempt, want := range []time.Duration{100, 200, 400, 500, 500} {
			want *= time.Millisecond
			r, ok := reserve1(t, b, "q")
			if !ok || r.Attempts != attempt+1 {
				t.Fatalf("attempt %d: %+v %v", attempt+1, r, ok)
			}
			now := time.Now()
			n, err := svc(b).Nack(ctx, "q", "a", r.Lease, task.RetryDelay, fmt.Sprint("fail ", attempt+1))
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := now.Add(want*9/10), now.Add(want*11/10)
			if n.State != task.Delayed || n.Due.Before(lo) || n.Due.After(hi) || n.LastError != fmt.Sprint("fail ", attempt+1) {
				t.Fatalf("attempt %d nacked: %+v, want delayed due in [%v, %v] after now", attempt+1, n, want*9/10, want*11/10)
			}
			time.Sleep(n.Due.Sub(now) - time.Millisecond)
			if _, ok := reserve1(t, b, "q"); ok {
				t.Fatalf("attempt %d: back before its back-off", attempt+1)
			}
			time.Sleep(3 * time.Millisecond)
			if x := get(t, b, "q", "a"); x.State != task.Ready {
				t.Fatalf("attempt %d: %s after its back-off", attempt+1, x.State)
			}
		}
		// A nack's own delay wins over the policy.
		r, _ := reserve1(t, b, "q")
		n, err := svc(b).Nack(ctx, "q", "a", r.Lease, 0, "")
		if err != nil || n.State != task.Ready || n.LastError != "" {
			t.Fatalf("nack with delay 0: %+v %v", n, err)
		}
	})
}

// TestPolicy_LeaseExpiryIsFailure: a lease that runs out is a failed
// attempt: last error "lease expired", a timeout counted, the retry
// policy's back-off, and dead at the last attempt.
func TestPolicy_LeaseExpiryIsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		setPolicy(t, b, "q", task.Policy{Retry: &task.Retry{Initial: time.Second, Max: time.Second, Multiplier: 1}})
		put(t, b, "q", task.PutRequest{ID: "a", TTR: 100 * time.Millisecond, MaxAttempts: 2})
		reserve1(t, b, "q")
		time.Sleep(102 * time.Millisecond)
		x := get(t, b, "q", "a")
		if x.State != task.Delayed || x.LastError != task.LeaseExpired || x.Timeouts != 1 || !x.LeaseUntil.IsZero() {
			t.Fatalf("after expiry: %+v", x)
		}
		if d := time.Until(x.Due); d < 900*time.Millisecond || d > time.Second {
			t.Fatalf("back in %v, want the policy's 1s", d)
		}
		time.Sleep(time.Second)
		r, ok := reserve1(t, b, "q")
		if !ok || r.Attempts != 2 || r.LeaseUntil.IsZero() {
			t.Fatalf("second attempt: %+v %v", r, ok)
		}
		time.Sleep(102 * time.Millisecond)
		x = get(t, b, "q", "a")
		if x.State != task.Dead || x.LastError != task.LeaseExpired || x.Timeouts != 2 {
			t.Fatalf("after the last attempt's expiry: %+v", x)
		}
	})
}

// TestPolicy_ReleaseKeepsAttempt: a released task's attempt does not
// count, so a task of max_attempts 1 released is reservable again, and
// its next failure kills it.
func TestPolicy_ReleaseKeepsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a", MaxAttempts: 1})
		r, _ := reserve1(t, b, "q")
		x, err := svc(b).Release(ctx, "q", "a", r.Lease, 0)
		if err != nil || x.State != task.Ready || x.Attempts != 0 || x.Releases != 1 || x.Lease != "" {
			t.Fatalf("release: %+v %v", x, err)
		}
		if _, err := svc(b).Release(ctx, "q", "a", r.Lease, 0); !errors.Is(err, task.ErrLease) {
			t.Fatalf("second release with the same lease: %v", err)
		}
		r, ok := reserve1(t, b, "q")
		if !ok || r.Attempts != 1 {
			t.Fatalf("after release: %+v %v", r, ok)
		}
		x, err = svc(b).Release(ctx, "q", "a", r.Lease, time.Second)
		if err != nil || x.State != task.Delayed || !x.Due.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("release with a delay: %+v %v", x, err)
		}
		time.Sleep(time.Second + 2*time.Millisecond)
		r, _ = reserve1(t, b, "q")
		x, err = svc(b).Nack(ctx, "q", "a", r.Lease, task.RetryDelay, "no")
		if err != nil || x.State != task.Dead || x.Attempts != 1 {
			t.Fatalf("nack at the last attempt: %+v %v", x, err)
		}
	})
}

// TestPolicy_Bury: a bury makes the task dead whatever attempts are left,
// with its reason kept; a kick brings it back.
func TestPolicy_Bury(t *testing.T) {
	b := open(t, memstore.New())
	put(t, b, "q", task.PutRequest{ID: "a"})
	r, _ := reserve1(t, b, "q")
	x, err := svc(b).Bury(ctx, "q", "a", r.Lease, "poison")
	if err != nil || x.State != task.Dead || x.Buries != 1 || x.LastError != "poison" || x.Attempts != 1 {
		t.Fatalf("bury: %+v %v", x, err)
	}
	if _, err := svc(b).Bury(ctx, "q", "a", r.Lease, "again"); !errors.Is(err, task.ErrLease) {
		t.Fatalf("bury of a dead task: %v", err)
	}
	if err := svc(b).Kick(ctx, "q", "a"); err != nil {
		t.Fatal(err)
	}
	if x := get(t, b, "q", "a"); x.State != task.Ready || x.LastError != "poison" {
		t.Fatalf("after kick: %+v", x)
	}
}

// TestPolicy_DeadLetter: a task that dies (attempts used up, bury,
// beanstalkd's bury, a lease running out at the last attempt) moves to
// the dead-letter queue, ready, with its job id, payload, last error,
// priority and ttr (dlq has no policy giving one), no attempts and the
// default max_attempts (service.DeadLettered), replacing a task of its id
// there (even a reserved one).
func TestPolicy_DeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		setPolicy(t, b, "q", task.Policy{DeadLetter: "dlq", MaxAttempts: 1})
		old := put(t, b, "dlq", task.PutRequest{ID: "a", Payload: []byte("old")})
		oldLease, _ := reserve1(t, b, "dlq")
		orig := put(t, b, "q", task.PutRequest{ID: "a", Payload: []byte("new"), Priority: 7, TTR: 3 * time.Second})
		r, _ := reserve1(t, b, "q")
		x, err := svc(b).Nack(ctx, "q", "a", r.Lease, task.RetryDelay, "boom")
		if err != nil {
			t.Fatal(err)
		}
		if x.Queue != "dlq" || x.State != task.Ready || x.JobID != orig.JobID || x.Attempts != 0 || x.LastError != "boom" {
			t.Fatalf("nack: %+v", x)
		}
		if _, err := svc(b).Get("q", "a"); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("the task still in its queue: %v", err)
		}
		g := get(t, b, "dlq", "a")
		if string(g.Payload) != "new" || g.Priority != 7 || g.TTR != 3*time.Second || g.MaxAttempts != service.DefaultMaxAttempts ||
			g.Attempts != 0 || g.LastError != "boom" || g.JobID != orig.JobID || g.JobID == old.JobID {
			t.Fatalf("in the dead-letter queue: %+v", g)
		}
		if j, err := svc(b).Job(orig.JobID); err != nil || j.Queue != "dlq" {
			t.Fatalf("job %d: %+v %v", orig.JobID, j, err)
		}
		if _, err := svc(b).Job(old.JobID); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("the replaced task: %v", err)
		}
		if err := svc(b).Ack(ctx, "dlq", "a", oldLease.Lease); !errors.Is(err, task.ErrLease) {
			t.Fatalf("ack of the replaced task: %v", err)
		}
		counts := map[string]task.QueueStats{}
		qs, _ := b.Queues(ctx)
		for _, s := range qs {
			counts[s.Name] = s
		}
		if c := counts["q"]; c.Ready+c.Reserved+c.Delayed+c.Dead != 0 || c.Policy.DeadLetter != "dlq" {
			t.Fatalf("q: %+v", c)
		}
		if c := counts["dlq"]; c.Ready != 1 || c.Reserved+c.Delayed+c.Dead != 0 {
			t.Fatalf("dlq: %+v", c)
		}
		if page, _, _ := b.FindTasks(ctx, "q", service.Filter{}, service.Cursor{}, 10); len(page) != 0 {
			t.Fatalf("q lists %+v", page)
		}

		// Bury, beanstalkd's bury, and a lease running out.
		put(t, b, "q", task.PutRequest{ID: "b", MaxAttempts: 5})
		r, _ = reserve1(t, b, "q")
		if x, err := svc(b).Bury(ctx, "q", "b", r.Lease, "bad"); err != nil || x.Queue != "dlq" || x.State != task.Ready || x.Buries != 1 {
			t.Fatalf("bury: %+v %v", x, err)
		}
		put(t, b, "q", task.PutRequest{ID: "c"})
		r, _ = reserve1(t, b, "q")
		if err := svc(b).BuryJob(ctx, r.JobID, r.Lease, 3); err != nil {
			t.Fatal(err)
		}
		if x := get(t, b, "dlq", "c"); x.State != task.Ready || x.Priority != 3 {
			t.Fatalf("after BuryJob: %+v", x)
		}
		put(t, b, "q", task.PutRequest{ID: "d", TTR: 100 * time.Millisecond})
		reserve1(t, b, "q")
		time.Sleep(102 * time.Millisecond)
		if x := get(t, b, "dlq", "d"); x.State != task.Ready || x.LastError != task.LeaseExpired || x.Timeouts != 1 {
			t.Fatalf("after expiry: %+v", x)
		}
		if n, _, _ := b.FindTasks(ctx, "dlq", service.Filter{State: task.Ready}, service.Cursor{}, 10); len(n) != 4 {
			t.Fatalf("dlq lists %d ready tasks, want 4", len(n))
		}
	})
}

// TestPolicy_PutDefaults: a put without ttr or max_attempts takes the
// policy's; a put's own win.
func TestPolicy_PutDefaults(t *testing.T) {
	b := open(t, memstore.New())
	setPolicy(t, b, "q", task.Policy{TTR: 5 * time.Second, MaxAttempts: 3})
	if x := put(t, b, "q", task.PutRequest{ID: "a"}); x.TTR != 5*time.Second || x.MaxAttempts != 3 {
		t.Fatalf("defaults: %+v", x)
	}
	if x := put(t, b, "q", task.PutRequest{ID: "b", TTR: time.Second, MaxAttempts: 1}); x.TTR != time.Second || x.MaxAttempts != 1 {
		t.Fatalf("own: %+v", x)
	}
	if err := svc(b).DeletePolicy(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if x := put(t, b, "q", task.PutRequest{ID: "c"}); x.TTR != time.Minute || x.MaxAttempts != service.DefaultMaxAttempts {
		t.Fatalf("after delete: %+v; want the default max_attempts", x)
	}
	if p, err := b.Policy(ctx, "q"); err != nil || !p.IsZero() {
		t.Fatalf("policy after delete: %+v %v", p, err)
	}
}

// reopenable names the stores TestPolicy_SurvivesRestart runs over: each
// returns a store over the same data every time it is called.
func reopenable(t *testing.T) map[string]func() store.Store {
	mem := memstore.New()
	dir := filepath.Join(t.TempDir(), "data")
	// Every store opened is closed before the directory is removed
	// (cleanups run last-registered first), so one a test leaves open
	// cannot write into the directory while it goes.
	var opened []*pebblestore.Store
	t.Cleanup(func() {
		for _, st := range opened {
			st.Close()
		}
	})
	return map[string]func() store.Store{
		"memstore": func() store.Store { return mem },
		"pebble": func() store.Store {
			st, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			opened = append(opened, st)
			return st
		},
	}
}

// TestPolicy_SurvivesRestart: policies, pauses (finite and indefinite)
// and pause counts are durable, and a lease that ran out while the
// broker was down is settled under its queue's policy.
func TestPolicy_SurvivesRestart(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			want := task.Policy{
				Retry:       &task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.5},
				MaxAttempts: 1, TTR: 50 * time.Millisecond,
				Rate:        &task.Rate{Limit: 5, Per: time.Second, Burst: 5},
				Concurrency: 2, DeadLetter: "dlq",
			}
			setPolicy(t, b, "q", want)
			setPolicy(t, b, "gone", task.Policy{Concurrency: 1})
			if err := svc(b).DeletePolicy(ctx, "gone"); err != nil {
				t.Fatal(err)
			}
			if err := svc(b).PauseQueue(ctx, "hour", time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := svc(b).PauseQueue(ctx, "ever", task.PauseIndefinitely); err != nil {
				t.Fatal(err)
			}
			if err := svc(b).PauseQueue(ctx, "ever", task.PauseIndefinitely); err != nil {
				t.Fatal(err)
			}
			put(t, b, "ever", task.PutRequest{ID: "e"})
			put(t, b, "plain", task.PutRequest{ID: "n"})
			if r, _ := reserve1(t, b, "plain"); r.ID != "n" {
				t.Fatalf("reserved %+v", r)
			} else if _, err := svc(b).Nack(ctx, "plain", "n", r.Lease, time.Hour, "why"); err != nil {
				t.Fatal(err)
			}
			put(t, b, "q", task.PutRequest{ID: "a", Payload: []byte("x")})
			if _, ok := reserve1(t, b, "q"); !ok {
				t.Fatal("nothing to reserve")
			}
			pausedUntil := time.Now().Add(time.Hour)
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if name == "pebble" {
				st.Close()
			}
			time.Sleep(60 * time.Millisecond) // the lease runs out while down

			st = newStore()
			if name == "pebble" {
				defer st.Close()
			}
			b = open(t, st)
			if p, err := b.Policy(ctx, "q"); err != nil || showPolicy(p) != showPolicy(want) {
				t.Fatalf("policy after restart: %s %v, want %s", showPolicy(p), err, showPolicy(want))
			}
			if p, err := b.Policy(ctx, "gone"); err != nil || !p.IsZero() {
				t.Fatalf("deleted policy after restart: %+v %v", p, err)
			}
			stats := map[string]task.QueueStats{}
			qs, _ := b.Queues(ctx)
			for _, s := range qs {
				stats[s.Name] = s
			}
			if s := stats["hour"]; s.PausedUntil.Before(pausedUntil.Add(-time.Second)) || s.PausedUntil.After(pausedUntil) {
				t.Fatalf("hour: paused until %v, want %v", s.PausedUntil, pausedUntil)
			}
			if s := stats["ever"]; !s.PausedUntil.Equal(task.PausedForever) {
				t.Fatalf("ever: %+v", s)
			}
			if _, ok := stats["gone"]; ok {
				t.Fatalf("gone listed: %+v", stats["gone"])
			}
			if d, _ := b.Queue("ever"); d.Pauses != 2 || d.PauseLeft <= 0 {
				t.Fatalf("ever's detail: %+v", d)
			}
			if _, ok := reserve1(t, b, "ever"); ok {
				t.Fatal("a paused queue handed out a task after restart")
			}
			if x := get(t, b, "dlq", "a"); x.State != task.Ready || x.LastError != task.LeaseExpired || string(x.Payload) != "x" {
				t.Fatalf("the expired task: %+v", x)
			}
			if x := get(t, b, "plain", "n"); x.State != task.Delayed || x.LastError != "why" {
				t.Fatalf("the nacked task: %+v", x)
			}
			if err := svc(b).PauseQueue(ctx, "ever", 0); err != nil {
				t.Fatal(err)
			}
			if _, ok := reserve1(t, b, "ever"); !ok {
				t.Fatal("nothing handed out after resume")
			}
		})
	}
}

// TestPolicy_RateSurvivesRestart: a queue's rate-limit budget is
// durable, as a cluster node's is: with 2 tasks an hour, two reserves
// (in one group or two), with writes of the queue's record (pauses)
// between and after them, leave none after a restart; setting the same rate again keeps the bucket, and a
// different rate starts with a full one.
func TestPolicy_RateSurvivesRestart(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			hourly := task.Policy{Rate: &task.Rate{Limit: 2, Per: time.Hour}}
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			setPolicy(t, b, "q", hourly)
			setPolicy(t, b, "other", hourly)
			for i := range 4 {
				put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i)})
			}
			put(t, b, "other", task.PutRequest{ID: "o"})
			if _, ok := reserve1(t, b, "q"); !ok {
				t.Fatal("the first token: nothing reserved")
			}
			if err := svc(b).PauseQueue(ctx, "q", time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := svc(b).PauseQueue(ctx, "q", 0); err != nil {
				t.Fatal(err)
			}
			if _, ok := reserve1(t, b, "q"); !ok {
				t.Fatal("the second token: nothing reserved")
			}
			if _, ok := reserve1(t, b, "q"); ok {
				t.Fatal("a third task within the hour before the restart")
			}
			if err := svc(b).PauseQueue(ctx, "q", 0); err != nil { // the last write of q's record
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if name == "pebble" {
				st.Close()
			}

			st = newStore()
			if name == "pebble" {
				defer st.Close()
			}
			b = open(t, st)
			if r, ok := reserve1(t, b, "q"); ok {
				t.Fatalf("after a restart the queue's tokens came back: reserved %s", r.ID)
			}
			if _, ok := reserve1(t, b, "other"); !ok {
				t.Fatal("a queue whose bucket was never used is not full after a restart")
			}
			setPolicy(t, b, "q", task.Policy{Rate: &task.Rate{Limit: 2, Per: time.Hour}, MaxAttempts: 3})
			if r, ok := reserve1(t, b, "q"); ok {
				t.Fatalf("the same rate set again refilled the bucket: reserved %s", r.ID)
			}
			setPolicy(t, b, "q", task.Policy{Rate: &task.Rate{Limit: 1, Per: time.Hour}})
			if _, ok := reserve1(t, b, "q"); !ok {
				t.Fatal("a new rate does not start with a full bucket")
			}
		})
	}
}

// heldStore is a store.Pipeliner over memstore whose fsyncs can be held
// (hold) until release; it records the queue records each Apply writes.
type heldStore struct {
	store.Store
	mu     sync.Mutex
	held   chan struct{} // nil: fsyncs end at once
	queues [][]store.Queue
}

func (s *heldStore) Apply(b *store.Batch) (func() error, error) {
	var qs []store.Queue
	for _, op := range b.Ops {
		if op.Kind == store.PutQueue {
			qs = append(qs, op.Queue)
		}
	}
	if err := s.Store.Commit(b); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues = append(s.queues, qs)
	held := s.held
	return func() error {
		if held != nil {
			<-held
		}
		return nil
	}, nil
}

func (s *heldStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = make(chan struct{})
}

func (s *heldStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.held)
	s.held = nil
}

// TestPolicy_RateBucketOneWrite: reserves of a rate-limited queue whose
// reservations share a group commit write the queue's record once in it,
// with the bucket as the last of them left it.
func TestPolicy_RateBucketOneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &heldStore{Store: memstore.New()}
		b := open(t, st)
		setPolicy(t, b, "q", task.Policy{Rate: &task.Rate{Limit: 3, Per: time.Hour}})
		for _, id := range []string{"a", "b", "c", "d"} {
			put(t, b, "q", task.PutRequest{ID: id})
		}
		st.mu.Lock()
		before := len(st.queues)
		st.mu.Unlock()

		st.hold()
		for _, id := range []string{"a", "b", "c"} {
			if r, ok := reserve1(t, b, "q"); !ok || r.ID != id {
				t.Fatalf("reserved %+v, %v; want %s", r, ok, id)
			}
			synctest.Wait() // the first group applied, waiting for its fsync; the others held
		}
		st.release()
		if _, err := b.Policy(ctx, "q"); err != nil { // every write committed
			t.Fatal(err)
		}
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("a fourth task within the hour")
		}
		st.mu.Lock()
		applied := st.queues[before:]
		st.mu.Unlock()
		var writes []store.Queue
		for i, qs := range applied {
			if len(qs) > 1 {
				t.Errorf("apply %d wrote the queue's record %d times: %+v", i, len(qs), qs)
			}
			writes = append(writes, qs...)
		}
		if len(writes) != 2 {
			t.Fatalf("3 reserves in 2 groups wrote the queue's record %d times, want 2: %+v", len(writes), writes)
		}
		if last := writes[1]; last.TokensAt == 0 || last.Tokens >= 1 {
			t.Fatalf("the record written last keeps %v tokens at %d, want none left", last.Tokens, last.TokensAt)
		}
		recs, err := st.Queues()
		if err != nil || len(recs) != 1 || recs[0].Tokens >= 1 || recs[0].TokensAt == 0 {
			t.Fatalf("stored: %+v, %v; want q's record with no token left", recs, err)
		}
	})
}

// TestRestoreBucket: a bucket restored from its record is refilled for
// the wall-clock time since it was written, up to its burst, and no more:
// a wall clock stepped back refills nothing, and a count beyond the
// burst, negative or not a number is cut.
func TestRestoreBucket(t *testing.T) {
	r := task.Rate{Limit: 10, Per: time.Second, Burst: 5} // a token each 100 ms
	const wall, mono = int64(1_000_000_000_000), int64(7)
	for _, c := range []struct {
		name        string
		tokens      float64
		at, now     int64
		want        float64
		wantZeroBkt bool
	}{
		{"never used", 3, 0, wall, 0, true},
		{"no time since", 1.5, wall, wall, 1.5, false},
		{"250 ms since", 1.5, wall, wall + 250e6, 4, false},
		{"a day since", 0, wall, wall + 86400e9, 5, false},
		{"the clock stepped back", 0.5, wall, wall - 3600e9, 0.5, false},
		{"beyond the burst", 1e9, wall, wall, 5, false},
		{"negative", -3, wall, wall + 100e6, 1, false},
		{"not a number", math.NaN(), wall, wall, 0, false},
		{"infinite", math.Inf(1), wall, wall - 1, 5, false},
	} {
		got := broker.RestoreBucket(r, c.tokens, c.at, c.now, mono)
		if c.wantZeroBkt {
			if got != (service.Bucket{}) {
				t.Errorf("%s: %+v, want the zero (full) bucket", c.name, got)
			}
			continue
		}
		if got.At != mono || math.Abs(got.Tokens-c.want) > 1e-9 {
			t.Errorf("%s: %+v, want %v tokens at %d", c.name, got, c.want, mono)
		}
	}
}

// showPolicy shows p with what its pointers point to.
func showPolicy(p task.Policy) string {
	retry, rate := p.Retry, p.Rate
	p.Retry, p.Rate = nil, nil
	s := fmt.Sprintf("%+v", p)
	if retry != nil {
		s += fmt.Sprintf(" retry %+v", *retry)
	}
	if rate != nil {
		s += fmt.Sprintf(" rate %+v", *rate)
	}
	return s
}

// TestPolicy_Rate: with a limit of 10 per 100 ms (burst 10), reservers
// waiting on the queue are handed at most 10 + t/10ms tasks by time t,
// and no wake-up is lost: all 100 tasks are handed out by 900 ms.
func TestPolicy_Rate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		setPolicy(t, b, "q", task.Policy{Rate: &task.Rate{Limit: 10, Per: 100 * time.Millisecond}})
		const n = 100
		for i := range n {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i)})
		}
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					ts, err := svc(b).Reserve(ctx, "q", 3, time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ts) == 0 {
						return
					}
					mu.Lock()
					for range ts {
						at = append(at, time.Since(start))
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(at) != n {
			t.Fatalf("handed out %d tasks, want %d", len(at), n)
		}
		for i, d := range at {
			if allowed := 10 + int(d/(10*time.Millisecond)); i+1 > allowed {
				t.Fatalf("%d tasks handed out by %v, over the limit's %d", i+1, d, allowed)
			}
		}
		if last := at[n-1]; last > 900*time.Millisecond+5*time.Millisecond {
			t.Fatalf("the last task handed out after %v, want 900ms", last)
		}
		// The limit applies to ReserveQueues and ReserveAny as well, but
		// not to ReserveJob.
		for i := range 20 {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint("more", i)})
		}
		time.Sleep(time.Second) // a full bucket again
		got := 0
		for range 3 {
			ts, _ := b.ReserveQueues(ctx, []string{"q", "other"}, 5, 0)
			got += len(ts)
		}
		if _, ok, _ := svc(b).ReserveAny(ctx, []string{"q"}, 0); ok {
			got++
		}
		if got != 10 {
			t.Fatalf("reserves got %d at once, want the burst of 10", got)
		}
		j, _ := svc(b).Peek("q", task.Ready)
		if _, err := b.ReserveJob(ctx, j.JobID); err != nil {
			t.Fatalf("reserve-job of a rate-limited queue: %v", err)
		}
	})
}

// TestPolicy_Concurrency: at most Concurrency of a queue's tasks are
// reserved at once, whatever the reservers, and a task leaving its
// reservation in any way (ack, nack, release, bury, delete, lease
// expiry) lets a waiting reserver take the next at once.
func TestPolicy_Concurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		const limit, n = 3, 60
		setPolicy(t, b, "q", task.Policy{Concurrency: limit})
		for i := range n {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i), TTR: 20 * time.Millisecond, MaxAttempts: 1})
		}
		var held, peak, done atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					ts, err := svc(b).Reserve(ctx, "q", 2, time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					if len(ts) == 0 {
						return
					}
					if h := held.Add(int64(len(ts))); h > peak.Load() {
						peak.Store(h)
					}
					if (w+i)%6 == 5 {
						held.Add(-int64(len(ts)))         // before the end, which may hand the places over at once
						time.Sleep(25 * time.Millisecond) // the leases run out
						done.Add(int64(len(ts)))
						continue
					}
					for _, x := range ts {
						time.Sleep(time.Duration(1+(w+i)%5) * time.Millisecond)
						held.Add(-1)
						var err error
						switch (w + i) % 6 {
						case 0:
							err = svc(b).Ack(ctx, "q", x.ID, x.Lease)
						case 1:
							_, err = svc(b).Nack(ctx, "q", x.ID, x.Lease, task.RetryDelay, "")
						case 2:
							_, err = svc(b).Bury(ctx, "q", x.ID, x.Lease, "")
						case 3:
							err = svc(b).Delete(ctx, "q", x.ID)
						case 4:
							_, err = svc(b).Release(ctx, "q", x.ID, x.Lease, 0)
						}
						if err != nil {
							t.Error(err)
						}
						done.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if p := peak.Load(); p > limit {
			t.Fatalf("%d tasks reserved at once, over the limit of %d", p, limit)
		}
		if s, _ := b.Queue("q"); s.Ready+s.Delayed+s.Reserved != 0 {
			t.Fatalf("left: %+v after %d ends", s, done.Load())
		}
	})
}

// TestPolicy_ConcurrencyWakesWaiter: a reserver waiting on a queue at its
// concurrency limit gets the next task as soon as one reserved ends.
func TestPolicy_ConcurrencyWakesWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		setPolicy(t, b, "q", task.Policy{Concurrency: 1})
		put(t, b, "q", task.PutRequest{ID: "a"})
		put(t, b, "q", task.PutRequest{ID: "b"})
		r, _ := reserve1(t, b, "q")
		got := make(chan []task.Task)
		go func() {
			ts, _ := svc(b).Reserve(ctx, "q", 1, time.Minute)
			got <- ts
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case ts := <-got:
			t.Fatalf("handed out %v over the limit", ts)
		default:
		}
		start := time.Now()
		if err := svc(b).Ack(ctx, "q", r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
		ts := <-got
		if len(ts) != 1 || ts[0].ID != "b" || time.Since(start) != 0 {
			t.Fatalf("after the ack: %v after %v", ts, time.Since(start))
		}
		// Raising the limit wakes waiters too.
		put(t, b, "q", task.PutRequest{ID: "c"})
		go func() {
			ts, _ := svc(b).Reserve(ctx, "q", 1, time.Minute)
			got <- ts
		}()
		synctest.Wait()
		setPolicy(t, b, "q", task.Policy{Concurrency: 2})
		if ts := <-got; len(ts) != 1 || ts[0].ID != "c" {
			t.Fatalf("after raising the limit: %v", ts)
		}
	})
}

// TestPolicy_Pause: a pause holds reservers until it ends, on its own or
// by a resume; ReserveJob still takes a task of a paused queue.
func TestPolicy_Pause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a"})
		put(t, b, "q", task.PutRequest{ID: "b"})
		if err := svc(b).PauseQueue(ctx, "q", time.Second); err != nil {
			t.Fatal(err)
		}
		if s, _ := b.Queues(ctx); len(s) != 1 || !s[0].PausedUntil.Equal(time.Now().Add(time.Second)) {
			t.Fatalf("queues: %+v", s)
		}
		start := time.Now()
		ts, err := svc(b).Reserve(ctx, "q", 1, time.Minute)
		if err != nil || len(ts) != 1 || time.Since(start) < time.Second || time.Since(start) > time.Second+2*time.Millisecond {
			t.Fatalf("reserve: %v %v after %v", ts, err, time.Since(start))
		}
		if err := svc(b).PauseQueue(ctx, "q", task.PauseIndefinitely); err != nil {
			t.Fatal(err)
		}
		if s, _ := b.Queues(ctx); len(s) != 1 || !s[0].PausedUntil.Equal(task.PausedForever) {
			t.Fatalf("queues: %+v", s)
		}
		if err := service.New(b).PauseQueue(ctx, "q", task.PauseIndefinitely-1); !errors.Is(err, task.ErrInvalid) {
			t.Fatalf("a pause past MaxDelay: %v", err)
		}
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("handed out while paused")
		}
		j, _ := svc(b).Peek("q", task.Ready)
		if x, err := b.ReserveJob(ctx, j.JobID); err != nil || x.ID != "b" {
			t.Fatalf("reserve-job: %+v %v", x, err)
		}
		put(t, b, "q", task.PutRequest{ID: "c"})
		got := make(chan []task.Task)
		go func() {
			ts, _ := svc(b).Reserve(ctx, "q", 1, time.Minute)
			got <- ts
		}()
		time.Sleep(30 * time.Second)
		if err := svc(b).PauseQueue(ctx, "q", 0); err != nil {
			t.Fatal(err)
		}
		if ts := <-got; len(ts) != 1 || ts[0].ID != "c" {
			t.Fatalf("after resume: %v", ts)
		}
		if s, _ := b.Queues(ctx); len(s) != 1 || !s[0].PausedUntil.IsZero() {
			t.Fatalf("queues: %+v", s)
		}
	})
}

// TestPolicy_Metrics: retries, throttled reserves and dead-lettered
// tasks are counted per queue.
func TestPolicy_Metrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := broker.Open(memstore.New(), broker.Config{Logger: quiet, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	setPolicy(t, b, "q", task.Policy{DeadLetter: "dlq", Concurrency: 1, Retry: &task.Retry{}})
	setPolicy(t, b, "r", task.Policy{Rate: &task.Rate{Limit: 1, Per: time.Hour}})
	put(t, b, "q", task.PutRequest{ID: "a", MaxAttempts: 2})
	put(t, b, "q", task.PutRequest{ID: "b", Priority: 9})
	put(t, b, "r", task.PutRequest{ID: "a"})
	put(t, b, "r", task.PutRequest{ID: "b"})
	for range 2 {
		r, _ := reserve1(t, b, "q")
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("over the concurrency limit")
		}
		if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, task.RetryDelay, ""); err != nil {
			t.Fatal(err)
		}
	}
	reserve1(t, b, "r")
	if _, ok := reserve1(t, b, "r"); ok {
		t.Fatal("over the rate limit")
	}
	want := map[string]float64{
		`hourglass_task_retries_total{queue="q"}`:                            1,
		`hourglass_tasks_dead_lettered_total{queue="q"}`:                     1,
		`hourglass_reserves_throttled_total{queue="q",reason="concurrency"}`: 2,
		`hourglass_reserves_throttled_total{queue="r",reason="rate"}`:        1,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName() + "{"
			for i, l := range m.GetLabel() {
				if i > 0 {
					name += ","
				}
				name += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			if m.GetCounter() != nil {
				got[name+"}"] = m.GetCounter().GetValue()
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
