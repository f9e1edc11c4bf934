package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// openLimited opens a broker over a fresh store that keeps at most max
// queues, with its metrics in reg (nil: none).
func openLimited(t *testing.T, max int, reg *prometheus.Registry) *broker.Broker {
	t.Helper()
	cfg := broker.Config{Logger: quiet, MaxQueues: max}
	if reg != nil {
		cfg.Registerer = reg
	}
	b, err := broker.Open(memstore.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func wantQueues(t *testing.T, b *broker.Broker, kept, real int) {
	t.Helper()
	if k, r := broker.QueueCounts(b); k != kept || r != real {
		t.Errorf("queues kept %d, counted %d; want %d and %d", k, r, kept, real)
	}
}

// TestBroker_WaitLeavesNothing: reserves and long polls on names that
// hold nothing keep state only while they wait: afterwards no queue is
// kept or listed, and puts to new queues still fit under the limit.
func TestBroker_WaitLeavesNothing(t *testing.T) {
	synctest.Test(t, testWaitLeavesNothing)
}

func testWaitLeavesNothing(t *testing.T) {
	b := openLimited(t, 10, nil)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := time.Duration(0)
			if i%2 == 1 {
				wait = time.Millisecond
			}
			if _, err := b.ReserveQueues(ctx, []string{fmt.Sprintf("w%d", i), fmt.Sprintf("v%d", i)}, 1, wait); err != nil {
				t.Errorf("reserve %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if _, real := broker.QueueCounts(b); real != 0 {
		t.Errorf("queues counted after the waits: %d, want 0", real)
	}
	if qs, err := b.Queues(ctx); err != nil || len(qs) != 0 {
		t.Errorf("queues listed after the waits: %v, %v", qs, err)
	}
	time.Sleep(3 * time.Second) // twice the broker's idleGrace, and more
	wantQueues(t, b, 0, 0)
	for i := range 10 {
		put(t, b, fmt.Sprintf("p%d", i), task.PutRequest{ID: "1"})
	}
	if _, _, err := svc(b).Put(ctx, "p10", task.PutRequest{ID: "1"}); !errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), "too many queues") {
		t.Errorf("put past the limit: %v", err)
	}
	wantQueues(t, b, 10, 10)
}

// TestBroker_WaiterOnNameThenPut: a reserver waiting on a name that holds
// nothing is woken by the put that makes the queue, and what it kept goes
// once the task is acked.
func TestBroker_WaiterOnNameThenPut(t *testing.T) {
	b := openLimited(t, 1, nil)
	got := make(chan []task.Task)
	go func() {
		ts, err := svc(b).Reserve(ctx, "late", 1, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- ts
	}()
	for {
		if kept, _ := broker.QueueCounts(b); kept == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wantQueues(t, b, 1, 0) // waited on: kept, not counted
	put(t, b, "late", task.PutRequest{ID: "1"})
	ts := <-got
	if len(ts) != 1 {
		t.Fatalf("reserve woken by the put got %v", ts)
	}
	wantQueues(t, b, 1, 1)
	if err := svc(b).Ack(ctx, "late", "1", ts[0].Lease); err != nil {
		t.Fatal(err)
	}
	wantQueues(t, b, 0, 0)
	put(t, b, "other", task.PutRequest{ID: "1"}) // the one place is free again
}

// TestBroker_ScheduleCountsTowardLimit: a schedule into a new queue makes
// it, as a put does, so it is refused past the limit and its queue
// counts until the schedule is deleted.
func TestBroker_ScheduleCountsTowardLimit(t *testing.T) {
	b := openLimited(t, 2, nil)
	put(t, b, "a", task.PutRequest{ID: "1"})
	put(t, b, "b", task.PutRequest{ID: "1"})
	spec := task.ScheduleSpec{Name: "s", Cron: "0 0 1 1 *", Queue: "c"}
	if _, _, err := svc(b).SetSchedule(ctx, spec); !errors.Is(err, task.ErrInvalid) || !strings.Contains(err.Error(), "too many queues") {
		t.Fatalf("schedule into a third queue with a limit of 2: %v", err)
	}
	if err := svc(b).Delete(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc(b).SetSchedule(ctx, spec); err != nil {
		t.Fatalf("schedule once a queue went: %v", err)
	}
	if _, _, err := svc(b).Put(ctx, "d", task.PutRequest{ID: "1"}); !errors.Is(err, task.ErrInvalid) {
		t.Errorf("put into a new queue while the schedule's counts: %v", err)
	}
	if err := b.DeleteSchedule(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	put(t, b, "d", task.PutRequest{ID: "1"})
}

// TestBroker_QueueGoesWithWhatItHeld: a queue that held only a pause, or
// a policy, goes when it ends, and a queue's metric series go with it.
func TestBroker_QueueGoesWithWhatItHeld(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := openLimited(t, 100, reg)
	if err := svc(b).PauseQueue(ctx, "paused", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := svc(b).SetPolicy(ctx, "limited", task.Policy{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	wantQueues(t, b, 2, 2)
	if err := svc(b).PauseQueue(ctx, "paused", 0); err != nil {
		t.Fatal(err)
	}
	if err := svc(b).DeletePolicy(ctx, "limited"); err != nil {
		t.Fatal(err)
	}
	wantQueues(t, b, 0, 0)

	put(t, b, "retried", task.PutRequest{ID: "1"})
	tk, _ := reserve1(t, b, "retried")
	if _, err := svc(b).Nack(ctx, "retried", "1", tk.Lease, 0, "again"); err != nil {
		t.Fatal(err)
	}
	if n := series(t, reg, "hourglass_task_retries_total", "retried"); n != 1 {
		t.Fatalf("retries series of the queue: %d, want 1", n)
	}
	if err := svc(b).Delete(ctx, "retried", "1"); err != nil {
		t.Fatal(err)
	}
	if n := series(t, reg, "hourglass_task_retries_total", "retried"); n != 0 {
		t.Errorf("retries series of a queue gone: %d, want 0", n)
	}
	if n := series(t, reg, "hourglass_queue_tasks", ""); n != 0 {
		t.Errorf("queue tasks series with no queue: %d, want 0", n)
	}
}

// series counts the series of the metric name in reg whose queue label is
// queue (any queue for "").
func series(t *testing.T, reg *prometheus.Registry, name, queue string) (n int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && (queue == "" || l.GetValue() == queue) {
					n++
				}
			}
		}
	}
	return n
}

// TestBroker_NothingMadeByEmptyOps: a kick, a pause of 0 or a put that
// fails, naming a new queue, leaves no queue behind.
func TestBroker_NothingMadeByEmptyOps(t *testing.T) {
	b := openLimited(t, 10, nil)
	if n, err := svc(b).KickQueue(ctx, "kicked", 5); err != nil || n != 0 {
		t.Errorf("kick of a new queue: %d, %v", n, err)
	}
	if err := svc(b).PauseQueue(ctx, "unpaused", 0); err != nil {
		t.Fatal(err)
	}
	wantQueues(t, b, 0, 0)
}

// TestBroker_IdleBounded: names waited on in a stream of short long
// polls are kept for the grace after their waits only up to
// broker.MaxIdle of them.
func TestBroker_IdleBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openLimited(t, 1_000_000, nil) // only maxIdle bounds them
		names := make([]string, 100)
		for i := range broker.MaxIdle/len(names) + 20 {
			for j := range names {
				names[j] = fmt.Sprintf("n%d-%d", i, j)
			}
			if _, err := b.ReserveQueues(ctx, names, 1, time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if kept, _ := broker.QueueCounts(b); kept > broker.MaxIdle {
			t.Errorf("%d names kept after their waits, over %d", kept, broker.MaxIdle)
		}
		time.Sleep(3 * time.Second)
		wantQueues(t, b, 0, 0)
	})
}

// TestBroker_WaitedNamesBounded: past Config.MaxQueues names waited on
// that hold nothing, a long poll on a new name makes no state for it,
// yet gets a task put there within its wait.
func TestBroker_WaitedNamesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openLimited(t, 5, nil)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for i := range 5 {
			go b.ReserveQueues(ctx, []string{fmt.Sprintf("w%d", i)}, 1, time.Hour)
		}
		synctest.Wait()
		wantQueues(t, b, 5, 0)
		got := make(chan []task.Task)
		go func() {
			ts, err := svc(b).Reserve(ctx, "late", 1, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- ts
		}()
		synctest.Wait()
		wantQueues(t, b, 5, 0) // "late" is not waited on: no state
		put(t, b, "late", task.PutRequest{ID: "1"})
		if ts := <-got; len(ts) != 1 {
			t.Errorf("reserve on a name past the bound got %v, want the task put there", ts)
		}
		cancel()
	})
}

// TestBroker_ZeroPolicyMakesNoQueue: the zero policy (a DELETE of the
// policy, a PUT of {}) on a queue that has none changes nothing, so it
// neither makes a queue nor meets the limit on queues.
func TestBroker_ZeroPolicyMakesNoQueue(t *testing.T) {
	b := openLimited(t, 1, nil)
	if _, _, err := svc(b).Put(ctx, "a", task.PutRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc(b).SetPolicy(ctx, "b", task.Policy{}); err != nil {
		t.Fatalf("the zero policy on a new queue at the limit: %v", err)
	}
	if err := svc(b).DeletePolicy(ctx, "c"); err != nil {
		t.Fatalf("DeletePolicy of a new queue at the limit: %v", err)
	}
	wantQueues(t, b, 1, 1)
}
