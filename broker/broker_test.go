package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

var ctx = context.Background()

var quiet = slog.New(slog.DiscardHandler)

// open opens a broker over st and closes it at the end of the test.
func open(t *testing.T, st store.Store) *broker.Broker {
	t.Helper()
	b, err := broker.Open(st, broker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func put(t *testing.T, b *broker.Broker, q string, r task.PutRequest) task.Task {
	t.Helper()
	task, created, err := svc(b).Put(ctx, q, r)
	if err != nil {
		t.Fatalf("put %+v: %v", r, err)
	}
	if !created {
		t.Fatalf("put %+v: not created", r)
	}
	return task
}

func reserve1(t *testing.T, b *broker.Broker, q string) (task.Task, bool) {
	t.Helper()
	ts, err := svc(b).Reserve(ctx, q, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) == 0 {
		return task.Task{}, false
	}
	return ts[0], true
}

func TestBroker_DelayedNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		start := time.Now()
		put(t, b, "q", task.PutRequest{ID: "a", Delay: 1500 * time.Millisecond, Payload: []byte(`{"x":1}`)})
		for step := 0; step < 15; step++ {
			if _, ok := reserve1(t, b, "q"); ok {
				t.Fatalf("delivered %v after put, before its 1.5s delay", time.Since(start))
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond) // one 1 ms tick past due
		got, ok := reserve1(t, b, "q")
		if !ok {
			t.Fatalf("not delivered %v after put", time.Since(start))
		}
		if got.ID != "a" || string(got.Payload) != `{"x":1}` || got.Attempts != 1 || got.Lease == "" || got.State != task.Reserved {
			t.Fatalf("got %+v", got)
		}
	})
}

func TestBroker_LongPollAnswersWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a", Delay: 3 * time.Second})
		start := time.Now()
		ts, err := svc(b).Reserve(ctx, "q", 10, time.Minute)
		if err != nil || len(ts) != 1 {
			t.Fatalf("reserve: %v %v", ts, err)
		}
		if w := time.Since(start); w < 3*time.Second || w > 3*time.Second+2*time.Millisecond {
			t.Fatalf("long poll answered after %v, want 3s", w)
		}
		// Nothing more: waits the whole wait and answers empty.
		start = time.Now()
		ts, err = svc(b).Reserve(ctx, "q", 1, 5*time.Second)
		if err != nil || len(ts) != 0 || time.Since(start) != 5*time.Second {
			t.Fatalf("empty long poll: %v %v after %v", ts, err, time.Since(start))
		}
	})
}

func TestBroker_ManyWaitersEachGetOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		const n = 20
		got := make(chan string, n)
		for range n {
			go func() {
				ts, err := svc(b).Reserve(ctx, "q", 1, time.Minute)
				if err != nil || len(ts) != 1 {
					got <- fmt.Sprint("error ", ts, err)
					return
				}
				got <- ts[0].ID
			}()
		}
		synctest.Wait()
		for i := range n {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i), Delay: time.Duration(i) * time.Millisecond})
		}
		seen := map[string]bool{}
		for range n {
			id := <-got
			if seen[id] {
				t.Fatalf("%s delivered twice", id)
			}
			seen[id] = true
		}
		if len(seen) != n {
			t.Fatalf("got %v", seen)
		}
	})
}

func TestBroker_PriorityThenDueThenPutOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		now := time.Now()
		put(t, b, "q", task.PutRequest{ID: "p5-late", Priority: 5, At: now.Add(-time.Second)})
		put(t, b, "q", task.PutRequest{ID: "p5-early", Priority: 5, At: now.Add(-2 * time.Second)})
		put(t, b, "q", task.PutRequest{ID: "p1-b", Priority: 1})
		put(t, b, "q", task.PutRequest{ID: "p1-c", Priority: 1})
		put(t, b, "q", task.PutRequest{ID: "p0", Priority: 0, Delay: time.Second})
		time.Sleep(time.Second + 2*time.Millisecond)
		ts, err := svc(b).Reserve(ctx, "q", 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range ts {
			ids = append(ids, x.ID)
		}
		if fmt.Sprint(ids) != "[p0 p1-b p1-c p5-early p5-late]" {
			t.Fatalf("order %v", ids)
		}
	})
}

func TestBroker_LeaseExpiryRetriesThenDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a", TTR: time.Second, MaxAttempts: 2})
		first, _ := reserve1(t, b, "q")
		time.Sleep(999 * time.Millisecond)
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("redelivered before the lease ran out")
		}
		time.Sleep(3 * time.Millisecond)
		second, ok := reserve1(t, b, "q")
		if !ok || second.Attempts != 2 || second.Lease == first.Lease {
			t.Fatalf("after expiry: %+v %v", second, ok)
		}
		if err := svc(b).Ack(ctx, "q", "a", first.Lease); !errors.Is(err, task.ErrLease) {
			t.Fatalf("ack with the expired lease: %v", err)
		}
		time.Sleep(1100 * time.Millisecond)
		got, err := svc(b).Get("q", "a")
		if err != nil || got.State != task.Dead {
			t.Fatalf("after the last attempt: %+v %v", got, err)
		}
		if qs, _ := b.Queues(context.Background()); len(qs) != 1 || qs[0].Dead != 1 || qs[0].Ready+qs[0].Delayed+qs[0].Reserved != 0 {
			t.Fatalf("counts %+v", qs)
		}
		if err := svc(b).Kick(ctx, "q", "a"); err != nil {
			t.Fatal(err)
		}
		again, ok := reserve1(t, b, "q")
		if !ok || again.Attempts != 3 {
			t.Fatalf("after kick: %+v %v", again, ok)
		}
		if err := svc(b).Kick(ctx, "q", "a"); !errors.Is(err, task.ErrState) {
			t.Fatalf("kick of a reserved task: %v", err)
		}
	})
}

func TestBroker_AckTouchNack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a", TTR: time.Second})
		r, _ := reserve1(t, b, "q")
		time.Sleep(800 * time.Millisecond)
		if _, err := svc(b).Touch(ctx, "q", "a", r.Lease); err != nil {
			t.Fatal(err)
		}
		time.Sleep(800 * time.Millisecond) // past the first lease, within the renewed one
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("delivered again within a touched lease")
		}
		if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, 2*time.Second, ""); err != nil {
			t.Fatal(err)
		}
		if got, _ := svc(b).Get("q", "a"); got.State != task.Delayed || got.Releases != 1 {
			t.Fatalf("after nack: %+v", got)
		}
		time.Sleep(1999 * time.Millisecond)
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("delivered before the nack's delay")
		}
		time.Sleep(3 * time.Millisecond)
		r2, ok := reserve1(t, b, "q")
		if !ok || r2.Attempts != 2 {
			t.Fatalf("after nack delay: %+v", r2)
		}
		if err := service.New(b).Ack(ctx, "q", "a", ""); !errors.Is(err, task.ErrInvalid) {
			t.Fatalf("ack without lease: %v", err)
		}
		if err := svc(b).Ack(ctx, "q", "a", r2.Lease); err != nil {
			t.Fatal(err)
		}
		if _, err := svc(b).Get("q", "a"); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("get after ack: %v", err)
		}
		if err := svc(b).Ack(ctx, "q", "a", r2.Lease); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("second ack: %v", err)
		}
		time.Sleep(5 * time.Second)
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("acked task delivered again")
		}
	})
}

func TestBroker_IdempotentPutAndReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		first := put(t, b, "q", task.PutRequest{ID: "a", Payload: []byte(`1`), Delay: time.Hour})
		same, created, err := svc(b).Put(ctx, "q", task.PutRequest{ID: "a", Payload: []byte(`2`)})
		if err != nil || created || same.JobID != first.JobID || string(same.Payload) != `1` || same.State != task.Delayed {
			t.Fatalf("idempotent put: %+v %v %v", same, created, err)
		}
		repl, created, err := svc(b).Put(ctx, "q", task.PutRequest{ID: "a", Payload: []byte(`3`), Replace: true})
		if err != nil || created || repl.JobID == first.JobID || repl.State != task.Ready {
			t.Fatalf("replace: %+v %v %v", repl, created, err)
		}
		ts, _ := svc(b).Reserve(ctx, "q", 10, 0)
		if len(ts) != 1 || string(ts[0].Payload) != `3` {
			t.Fatalf("after replace: %+v", ts)
		}
		if err := svc(b).Ack(ctx, "q", "a", ts[0].Lease); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Hour)
		if _, ok := reserve1(t, b, "q"); ok {
			t.Fatal("the replaced task fired")
		}
	})
}

// TestBroker_BadInputChangesNothing checks the broker below service.New:
// what the checks refuse reaches nothing.
func TestBroker_BadInputChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := service.New(open(t, memstore.New()))
		bad := []struct {
			queue string
			r     task.PutRequest
			want  error
		}{
			{"", task.PutRequest{}, task.ErrInvalid},
			{"a/b", task.PutRequest{}, task.ErrInvalid},
			{"q", task.PutRequest{ID: "has space"}, task.ErrInvalid},
			{"q", task.PutRequest{ID: "a/b"}, task.ErrInvalid},
			{"q", task.PutRequest{Delay: -time.Second}, task.ErrInvalid},
			{"q", task.PutRequest{Delay: 11 * 365 * 24 * time.Hour}, task.ErrInvalid},
			{"q", task.PutRequest{Delay: time.Second, At: time.Now()}, task.ErrInvalid},
			{"q", task.PutRequest{Payload: make([]byte, task.DefaultMaxPayload+1)}, task.ErrTooLarge},
			{"q", task.PutRequest{MaxAttempts: -2}, task.ErrInvalid},
		}
		for _, c := range bad {
			if _, _, err := b.Put(ctx, c.queue, c.r); !errors.Is(err, c.want) {
				t.Errorf("put %q %+v: %v, want %v", c.queue, c.r, err, c.want)
			}
		}
		if qs, _ := b.Queues(context.Background()); len(qs) != 0 {
			t.Fatalf("refused puts made queues: %+v", qs)
		}
		res := b.PutBatch(ctx, "q", []task.PutRequest{{ID: "ok1"}, {ID: "bad id"}, {ID: "ok2"}})
		if res[0].Err != nil || !errors.Is(res[1].Err, task.ErrInvalid) || res[2].Err != nil {
			t.Fatalf("batch: %+v", res)
		}
		qs, _ := b.Queues(context.Background())
		if len(qs) != 1 || qs[0].Ready != 2 {
			t.Fatalf("queues after bad input: %+v", qs)
		}
		if _, err := svc(b).Reserve(ctx, "q", 0, 0); !errors.Is(err, task.ErrInvalid) {
			t.Fatalf("reserve max 0: %v", err)
		}
		if _, err := svc(b).Reserve(ctx, "q", 1, 6*time.Minute); !errors.Is(err, task.ErrInvalid) {
			t.Fatalf("reserve wait 6m: %v", err)
		}
	})
}

// TestBroker_Recovery closes a broker and opens another on the same store:
// delayed tasks keep their due times, tasks due while it was down are
// ready, running leases keep running, expired ones are settled, and job ids
// are never reused.
func TestBroker_Recovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "soon", Delay: time.Second, Priority: 2})
		late := put(t, b, "q", task.PutRequest{ID: "later", Delay: time.Hour})
		put(t, b, "q", task.PutRequest{ID: "leased", TTR: 10 * time.Second})
		held, _ := reserve1(t, b, "q")
		put(t, b, "q", task.PutRequest{ID: "expiring", TTR: 2 * time.Second, Priority: 1})
		exp, _ := reserve1(t, b, "q")
		gone := put(t, b, "q", task.PutRequest{ID: "gone"})
		if err := svc(b).Delete(ctx, "q", "gone"); err != nil {
			t.Fatal(err)
		}
		b.Close()

		time.Sleep(5 * time.Second) // down: "soon" falls due, "expiring"'s lease runs out
		b2 := open(t, st)
		ts, _ := svc(b2).Reserve(ctx, "q", 10, 0)
		var ids []string
		for _, x := range ts {
			ids = append(ids, x.ID)
		}
		if fmt.Sprint(ids) != "[expiring soon]" {
			t.Fatalf("ready after restart: %v", ids)
		}
		if ts[0].Attempts != 2 {
			t.Fatalf("expired lease: attempts %d", ts[0].Attempts)
		}
		if err := svc(b2).Ack(ctx, "q", "leased", held.Lease); err != nil {
			t.Fatalf("ack with a lease from before the restart: %v", err)
		}
		_ = exp
		got, err := svc(b2).Get("q", "later")
		if err != nil || !got.Due.Equal(late.Due) || got.State != task.Delayed {
			t.Fatalf("later: %+v %v", got, err)
		}
		n := put(t, b2, "q", task.PutRequest{Delay: 2 * time.Hour})
		if n.JobID <= gone.JobID {
			t.Fatalf("job id %d reused (deleted task had %d)", n.JobID, gone.JobID)
		}
		time.Sleep(time.Until(late.Due) + 2*time.Millisecond)
		if x, ok := reserve1(t, b2, "q"); !ok || x.ID != "later" {
			t.Fatalf("later not delivered at its due time: %+v", x)
		}
	})
}

func TestBroker_Schedules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc(b).SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "not a line", Queue: "q"}); !errors.Is(err, task.ErrInvalid) {
			t.Fatalf("bad cron: %v", err)
		}
		info, created, err := svc(b).SetSchedule(ctx, task.ScheduleSpec{Name: "tick", Cron: "@every 1m", Queue: "q", Payload: []byte(`"hi"`)})
		if err != nil || !created || info.Next.IsZero() {
			t.Fatalf("set: %+v %v %v", info, created, err)
		}
		time.Sleep(time.Until(info.Next) + time.Millisecond)
		r, ok := reserve1(t, b, "q")
		want := "tick@" + info.Next.Format(time.RFC3339)
		if !ok || r.ID != want || string(r.Payload) != `"hi"` {
			t.Fatalf("occurrence: %+v, want id %s", r, want)
		}
		if err := svc(b).Ack(ctx, "q", r.ID, r.Lease); err != nil {
			t.Fatal(err)
		}
		b.Close()
		time.Sleep(10 * time.Minute) // ten occurrences missed
		b2 := open(t, st)
		ts, _ := svc(b2).Reserve(ctx, "q", 100, 0)
		if len(ts) != 1 {
			t.Fatalf("after 10 missed occurrences: %d put, want the newest only", len(ts))
		}
		if err := svc(b2).Ack(ctx, "q", ts[0].ID, ts[0].Lease); err != nil {
			t.Fatal(err)
		}
		if s, _ := svc(b2).Schedules(context.Background()); len(s) != 1 || s[0].Last.IsZero() {
			t.Fatalf("schedules: %+v", s)
		}
		if err := b2.DeleteSchedule(ctx, "tick"); err != nil {
			t.Fatal(err)
		}
		if err := b2.DeleteSchedule(ctx, "tick"); !errors.Is(err, task.ErrNoSchedule) {
			t.Fatalf("second delete: %v", err)
		}
		time.Sleep(5 * time.Minute)
		if ts, _ := svc(b2).Reserve(ctx, "q", 100, 0); len(ts) != 0 {
			t.Fatalf("deleted schedule put %d", len(ts))
		}
	})
}

// TestBroker_GeneratedIDsAvoidClientIDs puts tasks with all-digit ids
// equal to job ids yet to come, then tasks without ids, across a restart.
func TestBroker_GeneratedIDsAvoidClientIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "4"})     // job 1
		put(t, b, "q", task.PutRequest{ID: "4@job"}) // job 2
		b.Close()
		b = open(t, st)
		put(t, b, "q", task.PutRequest{ID: "6"}) // job 3
		seen := map[string]bool{}
		for range 6 {
			tk := put(t, b, "q", task.PutRequest{})
			if seen[tk.ID] {
				t.Fatalf("id %s given twice", tk.ID)
			}
			seen[tk.ID] = true
		}
		if !seen["4@job@job"] || !seen["5"] || !seen["6@job"] || !seen["9"] {
			t.Fatalf("generated %v", seen)
		}
	})
}

// TestBroker_ReserveCallerGoneGivesBack cancels a long poll just as a task
// is handed to it: the task is ready again at once, its attempt not
// counted.
func TestBroker_ReserveCallerGoneGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		put(t, b, "q", task.PutRequest{ID: "a"})
		if ts, err := svc(b).Reserve(cctx, "q", 1, 0); err == nil || len(ts) != 0 {
			t.Fatalf("reserve with a cancelled context: %v %v", ts, err)
		}
		got, ok := reserve1(t, b, "q")
		if !ok || got.Attempts != 1 {
			t.Fatalf("after the caller left: %+v %v", got, ok)
		}
	})
}
