package broker_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

func attempts(t *testing.T, b *broker.Broker, q, id string) []task.Attempt {
	t.Helper()
	as, err := b.Attempts(ctx, q, id)
	if err != nil {
		t.Fatalf("attempts of %s/%s: %v", q, id, err)
	}
	return as
}

func finished(t *testing.T, b *broker.Broker, q, outcome string) []task.Finished {
	t.Helper()
	fs, _, err := svc(b).FinishedTasks(ctx, q, outcome, 0, task.MaxList)
	if err != nil {
		t.Fatalf("finished tasks of %s: %v", q, err)
	}
	return fs
}

// outcomes lists the attempts as "N:outcome:error", oldest first.
func outcomes(as []task.Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%d:%s:%s", a.N, a.Outcome, a.Error))
	}
	return out
}

// finishes lists the finished tasks as "id:outcome:attempts", newest
// first.
func finishes(fs []task.Finished) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s:%s:%d", f.ID, f.Outcome, f.Attempts))
	}
	return out
}

func same(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestHistory_Attempts: a task nacked, left to expire, then acked has
// three attempts, numbered, with their outcomes and errors, each started
// when it was reserved and ended when it was answered; while reserved
// the running attempt shows, and after the ack the attempts still
// answer and the queue's history lists the task acked.
func TestHistory_Attempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a", TTR: time.Second, MaxAttempts: 5})
		if as := attempts(t, b, "q", "a"); len(as) != 0 {
			t.Fatalf("attempts of a task never reserved: %+v", as)
		}
		start := time.Now()
		r, _ := reserve1(t, b, "q")
		time.Sleep(100 * time.Millisecond)
		as := attempts(t, b, "q", "a")
		if len(as) != 1 || as[0].N != 1 || !as[0].Started.Equal(start) || !as[0].Ended.IsZero() || as[0].Outcome != "" {
			t.Fatalf("running attempt: %+v", as)
		}
		if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, 0, "boom"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		reserve1(t, b, "q")
		time.Sleep(1500 * time.Millisecond) // the lease runs out
		time.Sleep(100 * time.Millisecond)
		r, ok := reserve1(t, b, "q")
		if !ok {
			t.Fatal("not ready again after its lease ran out")
		}
		time.Sleep(100 * time.Millisecond)
		if err := svc(b).Ack(ctx, "q", "a", r.Lease); err != nil {
			t.Fatal(err)
		}
		as = attempts(t, b, "q", "a")
		want := []string{"1:nacked:boom", "2:expired:" + task.LeaseExpired, "3:acked:"}
		if got := outcomes(as); !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		if !as[0].Started.Equal(start) {
			t.Errorf("first attempt started %v, want %v", as[0].Started, start)
		}
		for i, a := range as {
			if !a.Started.Before(a.Ended) {
				t.Errorf("attempt %d started %v, ended %v", a.N, a.Started, a.Ended)
			}
			if i > 0 && as[i-1].Ended.After(a.Started) {
				t.Errorf("attempt %d started %v, before attempt %d ended %v", a.N, a.Started, as[i-1].N, as[i-1].Ended)
			}
		}
		if d := as[1].Ended.Sub(as[1].Started); d < time.Second {
			t.Errorf("expired attempt lasted %v, under its ttr", d)
		}
		if !as[2].Ended.Equal(time.Now()) {
			t.Errorf("acked attempt ended %v, want now %v", as[2].Ended, time.Now())
		}
		fs := finished(t, b, "q", "")
		if got, want := finishes(fs), []string{"a:acked:3"}; !same(got, want) {
			t.Fatalf("history %v, want %v", got, want)
		}
		if f := fs[0]; f.JobID != r.JobID || f.Queue != "q" || f.LastError != task.LeaseExpired || !f.Finished.Equal(time.Now()) {
			t.Fatalf("finished %+v", f)
		}
		if _, err := b.Attempts(ctx, "q", "never"); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("attempts of a task never put: %v", err)
		}
	})
}

// TestHistory_Outcomes: a task dies of its attempts, is buried, or is
// deleted (waiting, replaced by a put, dead by DeleteDead); each leaves
// its queue once with that outcome, and the history pages newest first
// by outcome.
func TestHistory_Outcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "spent", MaxAttempts: 1})
		r, _ := reserve1(t, b, "q")
		if _, err := svc(b).Nack(ctx, "q", "spent", r.Lease, 0, "no luck"); err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "buried"})
		r, _ = reserve1(t, b, "q")
		if _, err := svc(b).Bury(ctx, "q", "buried", r.Lease, "poison"); err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "gone"})
		if err := svc(b).Delete(ctx, "q", "gone"); err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "kept", Payload: []byte("1")})
		if _, _, err := svc(b).Put(ctx, "q", task.PutRequest{ID: "kept", Payload: []byte("2"), Replace: true}); err != nil {
			t.Fatal(err)
		}
		if n, err := svc(b).DeleteDead(ctx, "q"); err != nil || n != 2 {
			t.Fatalf("delete dead: %d, %v", n, err)
		}
		// The two dead tasks are deleted at once, so their records come in
		// either order.
		want := []string{"buried:deleted:1", "spent:deleted:1", "kept:deleted:0", "gone:deleted:0", "buried:dead:1", "spent:dead:1"}
		listed := finishes(finished(t, b, "q", ""))
		got := slices.Clone(listed)
		if len(got) > 2 {
			slices.Sort(got[:2])
		}
		if !same(got, want) {
			t.Fatalf("history %v, want %v", got, want)
		}
		if got, want := finishes(finished(t, b, "q", task.FinishedDead)), []string{"buried:dead:1", "spent:dead:1"}; !same(got, want) {
			t.Fatalf("dead %v, want %v", got, want)
		}
		if got := finished(t, b, "q", task.FinishedAcked); len(got) != 0 {
			t.Fatalf("acked %v, want none", finishes(got))
		}
		if got := finished(t, b, "other", ""); len(got) != 0 {
			t.Fatalf("another queue's history %v", finishes(got))
		}
		if got, want := outcomes(attempts(t, b, "q", "spent")), []string{"1:nacked:no luck"}; !same(got, want) {
			t.Fatalf("attempts of spent %v, want %v", got, want)
		}
		if got, want := outcomes(attempts(t, b, "q", "buried")), []string{"1:buried:poison"}; !same(got, want) {
			t.Fatalf("attempts of buried %v, want %v", got, want)
		}
		if as := attempts(t, b, "q", "gone"); len(as) != 0 {
			t.Fatalf("attempts of a task deleted unreserved: %+v", as)
		}

		// Pages of two, by the cursor.
		var all []string
		var after uint64
		for page := 0; ; page++ {
			fs, next, err := svc(b).FinishedTasks(ctx, "q", "", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, finishes(fs)...)
			if (next == 0) != (len(fs) < 2) || page > 3 {
				t.Fatalf("page %d: %d tasks, next %d", page, len(fs), next)
			}
			if next == 0 {
				break
			}
			after = next
		}
		if !same(all, listed) {
			t.Fatalf("paged history %v, want %v", all, listed)
		}

		for _, c := range []struct {
			outcome string
			limit   int
		}{{"", 0}, {"", task.MaxList + 1}, {"pushed", 10}} {
			if _, _, err := service.New(b).FinishedTasks(ctx, "q", c.outcome, 0, c.limit); !errors.Is(err, task.ErrInvalid) {
				t.Errorf("outcome %q limit %d: %v, want ErrInvalid", c.outcome, c.limit, err)
			}
		}
		if _, _, err := service.New(b).FinishedTasks(ctx, "bad queue", "", 0, 10); !errors.Is(err, task.ErrInvalid) {
			t.Errorf("bad queue name: %v", err)
		}
	})
}

// TestHistory_DeadLetter: a task that dies into its queue's dead-letter
// queue is dead in the history of the queue it left, and its attempt
// records carry on with it in the dead-letter queue, where its attempts
// count from 0 again (service.DeadLettered).
func TestHistory_DeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		setPolicy(t, b, "q", task.Policy{MaxAttempts: 1, DeadLetter: "dlq"})
		put(t, b, "q", task.PutRequest{ID: "a"})
		r, _ := reserve1(t, b, "q")
		if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, 0, "boom"); err != nil {
			t.Fatal(err)
		}
		fs := finished(t, b, "q", "")
		if got, want := finishes(fs), []string{"a:dead:1"}; !same(got, want) {
			t.Fatalf("history of q %v, want %v", got, want)
		}
		if fs[0].Queue != "q" || fs[0].JobID != r.JobID || fs[0].LastError != "boom" {
			t.Fatalf("finished %+v", fs[0])
		}
		if got := finished(t, b, "dlq", ""); len(got) != 0 {
			t.Fatalf("history of dlq %v", finishes(got))
		}
		r, ok := reserve1(t, b, "dlq")
		if !ok {
			t.Fatal("not in the dead-letter queue")
		}
		if err := svc(b).Ack(ctx, "dlq", "a", r.Lease); err != nil {
			t.Fatal(err)
		}
		if got, want := outcomes(attempts(t, b, "dlq", "a")), []string{"1:nacked:boom", "2:acked:"}; !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		if got, want := finishes(finished(t, b, "dlq", "")), []string{"a:acked:1"}; !same(got, want) {
			t.Fatalf("history of dlq %v, want %v", got, want)
		}
	})
}

// TestHistory_Jobs: beanstalkd's verbs: a delete of a reserved job is an
// ack, release and bury end their attempts, a delete of a job not
// reserved is a delete.
func TestHistory_Jobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a"})
		r, _ := reserve1(t, b, "q")
		if err := svc(b).ReleaseJob(ctx, r.JobID, r.Lease, 5, 0); err != nil {
			t.Fatal(err)
		}
		r, _ = reserve1(t, b, "q")
		if err := svc(b).BuryJob(ctx, r.JobID, r.Lease, 5); err != nil {
			t.Fatal(err)
		}
		if err := svc(b).KickJob(ctx, r.JobID); err != nil {
			t.Fatal(err)
		}
		r, _ = reserve1(t, b, "q")
		if err := svc(b).DeleteJob(ctx, r.JobID, r.Lease); err != nil {
			t.Fatal(err)
		}
		if got, want := outcomes(attempts(t, b, "q", "a")), []string{"1:released:", "2:buried:", "3:acked:"}; !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		put(t, b, "q", task.PutRequest{ID: "b"})
		j := put(t, b, "q", task.PutRequest{ID: "c"})
		if err := svc(b).DeleteJob(ctx, j.JobID, ""); err != nil {
			t.Fatal(err)
		}
		if got, want := finishes(finished(t, b, "q", "")), []string{"c:deleted:0", "a:acked:3", "a:dead:2"}; !same(got, want) {
			t.Fatalf("history %v, want %v", got, want)
		}
	})
}

// TestHistory_Release: a release ends its attempt, released, and gives
// the attempt back (the task's Attempts), but the next attempt is
// numbered after it: attempts are numbered by reservation.
func TestHistory_Release(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := open(t, memstore.New())
		put(t, b, "q", task.PutRequest{ID: "a"})
		r, _ := reserve1(t, b, "q")
		if _, err := svc(b).Release(ctx, "q", "a", r.Lease, 0); err != nil {
			t.Fatal(err)
		}
		if got, want := outcomes(attempts(t, b, "q", "a")), []string{"1:released:"}; !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		time.Sleep(time.Second)
		r, _ = reserve1(t, b, "q")
		if r.Attempts != 1 {
			t.Fatalf("reserved again after a release: attempts %d, want 1", r.Attempts)
		}
		if got, want := outcomes(attempts(t, b, "q", "a")), []string{"1:released:", "2::"}; !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, 0, "x"); err != nil {
			t.Fatal(err)
		}
		r, _ = reserve1(t, b, "q")
		if err := svc(b).Ack(ctx, "q", "a", r.Lease); err != nil {
			t.Fatal(err)
		}
		if got, want := outcomes(attempts(t, b, "q", "a")), []string{"1:released:", "2:nacked:x", "3:acked:"}; !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		if got, want := finishes(finished(t, b, "q", "")), []string{"a:acked:2"}; !same(got, want) {
			t.Fatalf("history %v, want %v (the release not counted)", got, want)
		}
	})
}

// TestHistory_ExpiredWhileDown: a lease that ran out while the broker was
// down is an expired attempt, started when the task was reserved.
func TestHistory_ExpiredWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "a", TTR: time.Second})
		start := time.Now()
		reserve1(t, b, "q")
		b.Close()
		time.Sleep(2 * time.Second)
		b = open(t, st)
		as := attempts(t, b, "q", "a")
		if got, want := outcomes(as), []string{"1:expired:" + task.LeaseExpired}; !same(got, want) {
			t.Fatalf("attempts %v, want %v", got, want)
		}
		if !as[0].Started.Equal(start) || !as[0].Ended.Equal(time.Now()) {
			t.Fatalf("attempt %+v: want started %v, ended %v", as[0], start, time.Now())
		}
	})
}

// TestHistory_None: with the history kept for no time, nothing of it is
// written; the running attempt still shows.
func TestHistory_None(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet, History: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		put(t, b, "q", task.PutRequest{ID: "a"})
		r, _ := reserve1(t, b, "q")
		if as := attempts(t, b, "q", "a"); len(as) != 1 || as[0].N != 1 || as[0].Outcome != "" {
			t.Fatalf("running attempt %+v", as)
		}
		if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, 0, "x"); err != nil {
			t.Fatal(err)
		}
		r, _ = reserve1(t, b, "q")
		if err := svc(b).Ack(ctx, "q", "a", r.Lease); err != nil {
			t.Fatal(err)
		}
		put(t, b, "q", task.PutRequest{ID: "b"})
		if err := svc(b).Delete(ctx, "q", "b"); err != nil {
			t.Fatal(err)
		}
		if fs := finished(t, b, "q", ""); len(fs) != 0 {
			t.Fatalf("history %v", finishes(fs))
		}
		if _, err := b.Attempts(ctx, "q", "a"); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("attempts of an acked task: %v", err)
		}
		if seq, err := st.HistorySeq(); err != nil || seq != 0 {
			t.Fatalf("store's history seq %d, %v", seq, err)
		}
		if as, err := st.Attempts(r.JobID); err != nil || len(as) != 0 {
			t.Fatalf("store's attempts %+v, %v", as, err)
		}
	})
}

// TestHistory_Prune: records older than the retention go, with their
// jobs' attempts; newer ones stay.
func TestHistory_Prune(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet, History: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ack := func(id string) {
			put(t, b, "q", task.PutRequest{ID: id})
			r, _ := reserve1(t, b, "q")
			if err := svc(b).Ack(ctx, "q", id, r.Lease); err != nil {
				t.Fatal(err)
			}
		}
		ack("old")
		time.Sleep(40 * time.Second)
		ack("new")
		time.Sleep(30 * time.Second) // old is 70 s old, new 30 s
		if got, want := finishes(finished(t, b, "q", "")), []string{"new:acked:1"}; !same(got, want) {
			t.Fatalf("history %v, want %v", got, want)
		}
		if _, err := b.Attempts(ctx, "q", "old"); !errors.Is(err, task.ErrNotFound) {
			t.Fatalf("attempts of a pruned task: %v", err)
		}
		if got := outcomes(attempts(t, b, "q", "new")); !same(got, []string{"1:acked:"}) {
			t.Fatalf("attempts of new %v", got)
		}
		time.Sleep(time.Minute)
		if fs := finished(t, b, "q", ""); len(fs) != 0 {
			t.Fatalf("history after the retention %v", finishes(fs))
		}
	})
}

// TestHistory_PruneBatches: a prune of more than one batch removes it
// all, round after round.
func TestHistory_PruneBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		b, err := broker.Open(st, broker.Config{Logger: quiet, History: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		const n = 2500
		for i := range n {
			put(t, b, "q", task.PutRequest{ID: fmt.Sprint(i)})
		}
		for i := range n {
			if err := svc(b).Delete(ctx, "q", fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		if fs := finished(t, b, "q", ""); len(fs) != task.MaxList {
			t.Fatalf("history has %d, want a full page", len(fs))
		}
		time.Sleep(2 * time.Minute)
		if fs := finished(t, b, "q", ""); len(fs) != 0 {
			t.Fatalf("history after the retention has %d", len(fs))
		}
	})
}

// TestHistory_Reopen: the history and its numbering survive a restart,
// over memstore and Pebble, and a broker opened to keep none prunes what
// an earlier one kept.
func TestHistory_Reopen(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			put(t, b, "q", task.PutRequest{ID: "a"})
			r, _ := reserve1(t, b, "q")
			if _, err := svc(b).Nack(ctx, "q", "a", r.Lease, 0, "boom"); err != nil {
				t.Fatal(err)
			}
			r, _ = reserve1(t, b, "q")
			if err := svc(b).Ack(ctx, "q", "a", r.Lease); err != nil {
				t.Fatal(err)
			}
			if fs := finished(t, b, "q", ""); len(fs) == 0 {
				t.Fatalf("%s: no finished task in the history after an ack", name)
			}
			reopen := func(cfg broker.Config) {
				t.Helper()
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
				if name == "pebble" {
					st.Close()
				}
				st = newStore()
				cfg.Logger = quiet
				if b, err = broker.Open(st, cfg); err != nil {
					t.Fatal(err)
				}
			}
			reopen(broker.Config{})
			if got, want := outcomes(attempts(t, b, "q", "a")), []string{"1:nacked:boom", "2:acked:"}; !same(got, want) {
				t.Fatalf("attempts after reopen %v, want %v", got, want)
			}
			put(t, b, "q", task.PutRequest{ID: "b"})
			if err := svc(b).Delete(ctx, "q", "b"); err != nil {
				t.Fatal(err)
			}
			if got, want := finishes(finished(t, b, "q", "")), []string{"b:deleted:0", "a:acked:2"}; !same(got, want) {
				t.Fatalf("history after reopen %v, want %v", got, want)
			}
			reopen(broker.Config{History: -1})
			deadline := time.Now().Add(10 * time.Second)
			for len(finished(t, b, "q", "")) > 0 {
				if time.Now().After(deadline) {
					t.Fatal("history kept by a broker that keeps none")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := b.Attempts(ctx, "q", "a"); !errors.Is(err, task.ErrNotFound) {
				t.Fatalf("attempts after the prune: %v", err)
			}
			b.Close()
			if name == "pebble" {
				st.Close()
			}
		})
	}
}
