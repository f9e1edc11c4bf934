package broker_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/broker"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestMoveTask_SurvivesRestart: a moved task is in its new queue alone
// after a restart, in the state it had (delayed, ready, dead), with its
// job id and payload, and its old queue has no trace of it.
func TestMoveTask_SurvivesRestart(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			put := func(r task.PutRequest) task.Task {
				t.Helper()
				tk, _, err := svc(b).Put(ctx, "q", r)
				if err != nil {
					t.Fatal(err)
				}
				return tk
			}
			dead := put(task.PutRequest{ID: "dead", Payload: []byte(`"d"`), MaxAttempts: 1, Priority: 0})
			r, err := svc(b).Reserve(ctx, "q", 1, 0)
			if err != nil || len(r) != 1 {
				t.Fatal(r, err)
			}
			if _, err := svc(b).Nack(ctx, "q", "dead", r[0].Lease, 0, "boom"); err != nil {
				t.Fatal(err)
			}
			delayed := put(task.PutRequest{ID: "later", Payload: []byte(`"l"`), Delay: time.Hour})
			ready := put(task.PutRequest{ID: "now", Payload: []byte(`"n"`), Priority: 3})
			for _, tk := range []task.Task{dead, delayed, ready} {
				if err := b.MoveTask(ctx, "q", tk.JobID, "q2"); err != nil {
					t.Fatalf("move %s: %v", tk.ID, err)
				}
			}
			if err := b.MoveTask(ctx, "q", ready.JobID, "q2"); !errors.Is(err, task.ErrNotFound) {
				t.Fatalf("move of a task gone from q: %v", err)
			}
			b.Close()
			st.Close()

			b, err = broker.Open(newStore(), broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, c := range []struct {
				was task.Task
				st  task.State
			}{{dead, task.Dead}, {delayed, task.Delayed}, {ready, task.Ready}} {
				g, err := svc(b).Get("q2", c.was.ID)
				if err != nil || g.State != c.st || g.JobID != c.was.JobID || string(g.Payload) != string(c.was.Payload) {
					t.Fatalf("%s in q2 after a restart: %+v, %v; want %s", c.was.ID, g, err, c.st)
				}
				if _, err := svc(b).Get("q", c.was.ID); !errors.Is(err, task.ErrNotFound) {
					t.Fatalf("%s still in q: %v", c.was.ID, err)
				}
			}
			if page, _, err := b.FindTasks(ctx, "q", service.Filter{}, service.Cursor{}, 10); err != nil || len(page) != 0 {
				t.Fatalf("q after a restart: %+v, %v", page, err)
			}
			got, err := svc(b).Reserve(ctx, "q2", 1, 0)
			if err != nil || len(got) != 1 || got[0].ID != "now" {
				t.Fatalf("reserve q2: %+v, %v; want now", got, err)
			}
		})
	}
}

// TestFindTasks_DueOrder: random puts (due at random), reserves,
// releases with a delay, nacks to death, kicks, deletes and moves keep
// the due order in memory equal to the live tasks (CheckDueOrder), and
// FindTasks pages every task of a queue in ascending (due, job id); a
// restart rebuilds the same order from the records, nothing of it being
// written to the store.
func TestFindTasks_DueOrder(t *testing.T) {
	for name, newStore := range reopenable(t) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			b, err := broker.Open(st, broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			queues := []string{"a", "b"}
			for i := range 400 {
				q := queues[r.IntN(2)]
				switch op := r.IntN(10); {
				case op < 4:
					_, _, err = svc(b).Put(ctx, q, task.PutRequest{ID: fmt.Sprintf("t-%d", i), MaxAttempts: 2,
						Delay: time.Duration(r.IntN(3)) * time.Duration(r.IntN(3600)) * time.Second})
				case op < 6:
					var got []task.Task
					if got, err = svc(b).Reserve(ctx, q, 1, 0); err == nil && len(got) == 1 {
						if r.IntN(2) == 0 {
							_, err = svc(b).Release(ctx, q, got[0].ID, got[0].Lease, time.Duration(r.IntN(7200))*time.Second)
						} else {
							_, err = svc(b).Nack(ctx, q, got[0].ID, got[0].Lease, 0, "boom")
						}
					}
				case op < 7:
					_, err = svc(b).KickQueue(ctx, q, 3)
				case op < 8:
					page, _, ferr := b.FindTasks(ctx, q, service.Filter{}, service.Cursor{}, 5)
					if err = ferr; err == nil && len(page) > 0 {
						if err = svc(b).DeleteJob(ctx, page[r.IntN(len(page))].JobID, ""); errors.Is(err, task.ErrNotFound) {
							err = nil
						}
					}
				default:
					page, _, ferr := b.FindTasks(ctx, q, service.Filter{State: task.Delayed}, service.Cursor{}, 5)
					if err = ferr; err == nil && len(page) > 0 {
						err = b.MoveTask(ctx, q, page[0].JobID, queues[1-queues0(q)])
						if errors.Is(err, service.ErrClash) || errors.Is(err, task.ErrState) {
							err = nil
						}
					}
				}
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				if err := broker.CheckDueOrder(b); err != nil {
					t.Fatalf("after op %d: %v", i, err)
				}
			}
			before := map[string][]task.Task{}
			for _, q := range queues {
				before[q] = dueOrdered(t, b, q)
			}
			b.Close()
			st.Close()

			b, err = broker.Open(newStore(), broker.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := broker.CheckDueOrder(b); err != nil {
				t.Fatalf("after a restart: %v", err)
			}
			for _, q := range queues {
				after := dueOrdered(t, b, q)
				if len(after) != len(before[q]) || len(after) == 0 {
					t.Fatalf("queue %s: %d tasks after a restart, %d before", q, len(after), len(before[q]))
				}
				for i := range after {
					if after[i].JobID != before[q][i].JobID || !after[i].Due.Equal(before[q][i].Due) {
						t.Fatalf("queue %s at %d: %d due %v after a restart, %d due %v before", q, i,
							after[i].JobID, after[i].Due, before[q][i].JobID, before[q][i].Due)
					}
				}
			}
		})
	}
}

// queues0 is the index of q in {"a", "b"}.
func queues0(q string) int {
	if q == "a" {
		return 0
	}
	return 1
}

// dueOrdered returns every task of queue q by FindTasks in pages of 7,
// and fails t unless they are in ascending (due, job id).
func dueOrdered(t *testing.T, b *broker.Broker, q string) []task.Task {
	t.Helper()
	var all []task.Task
	var after service.Cursor
	for {
		page, next, err := b.FindTasks(ctx, q, service.Filter{}, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next.IsZero() {
			break
		}
		after = next
	}
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		if !(service.Cursor{Due: p.Due.UnixNano(), Job: p.JobID}).Before(c.Due.UnixNano(), c.JobID) {
			t.Fatalf("queue %s: %s (due %v, job %d) before %s (due %v, job %d)", q, p.ID, p.Due, p.JobID, c.ID, c.Due, c.JobID)
		}
	}
	return all
}
