package service_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// engine is a service.Engine that records what reaches it. Its methods
// that a test does not reach are the nil embedded Engine's: a call
// panics, failing the test.
type engine struct {
	service.Engine
	calls    int
	putBatch [][]task.PutRequest
	acks     [][]task.Ack
	policy   task.Policy
}

func (e *engine) Limits() service.Limits { return service.Limits{MaxDelay: time.Hour} }

func (e *engine) PutBatch(ctx context.Context, queue string, rs []task.PutRequest) []task.PutResult {
	e.calls++
	e.putBatch = append(e.putBatch, rs)
	out := make([]task.PutResult, len(rs))
	for i, r := range rs {
		out[i].Task = task.Task{Queue: queue, ID: r.ID}
	}
	return out
}

func (e *engine) AckMany(ctx context.Context, acks []task.Ack) ([]error, error) {
	e.calls++
	e.acks = append(e.acks, acks)
	errs := make([]error, len(acks))
	for i := range acks {
		errs[i] = task.ErrLease
	}
	return errs, nil
}

func (e *engine) SetQueue(ctx context.Context, queue string, c service.QueueChange) (task.Policy, error) {
	e.calls++
	e.policy = *c.Policy
	return e.policy, nil
}

// TestNew_BadInputReachesNothing calls each operation of New's Service
// with a bad argument: each answers an error wrapping task.ErrInvalid
// (task.ErrTooLarge for a payload), and the engine, which panics on any
// call, is never called.
func TestNew_BadInputReachesNothing(t *testing.T) {
	ctx := context.Background()
	e := &engine{}
	s := service.New(e)
	big := make([]byte, task.DefaultMaxPayload+1)
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"put, bad queue", func() error { _, _, err := s.Put(ctx, "a/b", task.PutRequest{}); return err }, task.ErrInvalid},
		{"put, delay over the engine's limit", func() error {
			_, _, err := s.Put(ctx, "q", task.PutRequest{Delay: 2 * time.Hour})
			return err
		}, task.ErrInvalid},
		{"put, payload too large", func() error { _, _, err := s.Put(ctx, "q", task.PutRequest{Payload: big}); return err }, task.ErrTooLarge},
		{"batch, bad queue", func() error { return s.PutBatch(ctx, "", []task.PutRequest{{}})[0].Err }, task.ErrInvalid},
		{"batch, too many", func() error { return s.PutBatch(ctx, "q", make([]task.PutRequest, task.MaxBatch+1))[0].Err }, task.ErrInvalid},
		{"batch, every item bad", func() error { return s.PutBatch(ctx, "q", []task.PutRequest{{ID: "a b"}})[0].Err }, task.ErrInvalid},
		{"get", func() error { _, err := s.Get("q", ".."); return err }, task.ErrInvalid},
		{"delete", func() error { return s.Delete(ctx, "q", "") }, task.ErrInvalid},
		{"reserve, max 0", func() error { _, err := s.Reserve(ctx, "q", 0, 0); return err }, task.ErrInvalid},
		{"reserve queues, none", func() error { _, err := s.ReserveQueues(ctx, nil, 1, 0); return err }, task.ErrInvalid},
		{"reserve any, wait too long", func() error {
			_, _, err := s.ReserveAny(ctx, []string{"q"}, task.MaxWait+1)
			return err
		}, task.ErrInvalid},
		{"ack, no lease", func() error { return s.Ack(ctx, "q", "a", "") }, task.ErrInvalid},
		{"ack many, none", func() error { _, err := s.AckMany(ctx, nil); return err }, task.ErrInvalid},
		{"touch, bad id", func() error { _, err := s.Touch(ctx, "q", "a/b", "l"); return err }, task.ErrInvalid},
		{"nack, delay over the limit", func() error { _, err := s.Nack(ctx, "q", "a", "l", 2*time.Hour, ""); return err }, task.ErrInvalid},
		{"release, negative delay", func() error { _, err := s.Release(ctx, "q", "a", "l", -1); return err }, task.ErrInvalid},
		{"bury, no lease", func() error { _, err := s.Bury(ctx, "q", "a", "", ""); return err }, task.ErrInvalid},
		{"kick", func() error { return s.Kick(ctx, "", "a") }, task.ErrInvalid},
		{"peek, reserved", func() error { _, err := s.Peek("q", task.Reserved); return err }, task.ErrInvalid},
		{"release job, delay over the limit", func() error { return s.ReleaseJob(ctx, 1, "l", 0, 2*time.Hour) }, task.ErrInvalid},
		{"kick queue", func() error { _, err := s.KickQueue(ctx, "a b", 1); return err }, task.ErrInvalid},
		{"pause, over the limit", func() error { return s.PauseQueue(ctx, "q", 2*time.Hour) }, task.ErrInvalid},
		{"queue", func() error { _, err := s.Queue(""); return err }, task.ErrInvalid},
		{"set policy, its own dead letter", func() error {
			_, err := s.SetPolicy(ctx, "q", task.Policy{DeadLetter: "q"})
			return err
		}, task.ErrInvalid},
		{"policy", func() error { _, err := s.Policy(ctx, "."); return err }, task.ErrInvalid},
		{"delete policy", func() error { return s.DeletePolicy(ctx, "") }, task.ErrInvalid},
		{"attempts", func() error { _, err := s.Attempts(ctx, "q", ""); return err }, task.ErrInvalid},
		{"finished, bad outcome", func() error { _, _, err := s.FinishedTasks(ctx, "q", "lost", 0, 10); return err }, task.ErrInvalid},
		{"set schedule, bad line", func() error {
			_, _, err := s.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "not a line", Queue: "q"})
			return err
		}, task.ErrInvalid},
		{"set schedule, @every 0s", func() error {
			_, _, err := s.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "@every 0s", Queue: "q"})
			return err
		}, task.ErrInvalid},
		{"set schedule, @every 1.5s", func() error {
			_, _, err := s.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "CRON_TZ=UTC @every 1500ms", Queue: "q"})
			return err
		}, task.ErrInvalid},
		{"set schedule, never fires", func() error {
			_, _, err := s.SetSchedule(ctx, task.ScheduleSpec{Name: "s", Cron: "0 0 30 2 *", Queue: "q"})
			return err
		}, task.ErrInvalid},
		{"check cron", func() error { _, err := s.CheckCron("61 * * * *", "", 3); return err }, task.ErrInvalid},
		{"check cron, @every 500ms", func() error { _, err := s.CheckCron("@every 500ms", "", 3); return err }, task.ErrInvalid},
		{"list, limit 0", func() error { _, _, err := s.FindTasks(ctx, "q", service.Filter{}, service.Cursor{}, 0); return err }, task.ErrInvalid},
		{"due histogram, no windows", func() error { _, _, err := s.DueHistogram(ctx, "", time.Second, 0); return err }, task.ErrInvalid},
		{"kick dead", func() error { _, err := s.KickDead(ctx, "a/b"); return err }, task.ErrInvalid},
		{"delete dead", func() error { _, err := s.DeleteDead(ctx, "a/b"); return err }, task.ErrInvalid},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if e.calls != 0 {
		t.Fatalf("the engine was called %d times", e.calls)
	}
}

// TestNew_Batches: a batch with bad items hands the engine only the good
// ones, in order, and puts their answers back in place; a batch of good
// items reaches the engine as it is.
func TestNew_Batches(t *testing.T) {
	ctx := context.Background()
	e := &engine{}
	s := service.New(e)

	res := s.PutBatch(ctx, "q", []task.PutRequest{{ID: "a"}, {ID: "b c"}, {ID: "d"}, {Delay: -1}, {ID: "e"}})
	if len(e.putBatch) != 1 || len(e.putBatch[0]) != 3 || e.putBatch[0][0].ID != "a" || e.putBatch[0][1].ID != "d" || e.putBatch[0][2].ID != "e" {
		t.Fatalf("the engine got %+v", e.putBatch)
	}
	for i, want := range []string{"a", "", "d", "", "e"} {
		switch {
		case want == "" && !errors.Is(res[i].Err, task.ErrInvalid):
			t.Errorf("result %d: %+v, want ErrInvalid", i, res[i])
		case want != "" && (res[i].Err != nil || res[i].Task.ID != want):
			t.Errorf("result %d: %+v, want task %s", i, res[i], want)
		}
	}
	good := []task.PutRequest{{ID: "x"}, {ID: "y"}}
	s.PutBatch(ctx, "q", good)
	if len(e.putBatch) != 2 || &e.putBatch[1][0] != &good[0] {
		t.Fatal("a batch of good items did not reach the engine as it was")
	}

	errs, err := s.AckMany(ctx, []task.Ack{{Queue: "q", ID: "a", Lease: "l"}, {Queue: "q", ID: "b"}, {Queue: "q", ID: "c", Lease: "l"}})
	if err != nil || len(errs) != 3 {
		t.Fatalf("AckMany: %v, %v", errs, err)
	}
	if len(e.acks) != 1 || len(e.acks[0]) != 2 || e.acks[0][0].ID != "a" || e.acks[0][1].ID != "c" {
		t.Fatalf("the engine got %+v", e.acks)
	}
	if !errors.Is(errs[0], task.ErrLease) || !errors.Is(errs[1], task.ErrInvalid) || !errors.Is(errs[2], task.ErrLease) {
		t.Fatalf("AckMany answered %v", errs)
	}

	// A policy reaches the engine normalised: a rate's burst is its limit.
	if _, err := s.SetPolicy(ctx, "q", task.Policy{Rate: &task.Rate{Limit: 7, Per: time.Second}}); err != nil {
		t.Fatal(err)
	}
	if e.policy.Rate == nil || e.policy.Rate.Burst != 7 {
		t.Fatalf("the engine got %+v", e.policy)
	}
}

// notifier is an engine that is a service.PolicyNotifier.
type notifier struct {
	engine
	registered int
}

func (n *notifier) NotifyPolicies(f func(queue string)) { n.registered++ }

// TestNew_PolicyNotifier: New's Service is a PolicyNotifier when its
// engine is one (a cluster node: the pusher registers through it), and
// not otherwise.
func TestNew_PolicyNotifier(t *testing.T) {
	n := &notifier{}
	pn, ok := service.New(n).(service.PolicyNotifier)
	if !ok {
		t.Fatal("New over a PolicyNotifier is not one")
	}
	pn.NotifyPolicies(func(string) {})
	if n.registered != 1 {
		t.Fatalf("the engine got %d registrations", n.registered)
	}
	if _, ok := service.New(&engine{}).(service.PolicyNotifier); ok {
		t.Fatal("New over an engine that is no PolicyNotifier is one")
	}
}

// TestEngine_Narrow: the engine's contract stays narrow (issue 41): what
// a front can make of the engine's primitives is front code, written
// once for both engines, not a method each engine implements.
func TestEngine_Narrow(t *testing.T) {
	const most = 25
	e := reflect.TypeFor[service.Engine]()
	if n := e.NumMethod(); n > most {
		var names []string
		for i := range n {
			names = append(names, e.Method(i).Name)
		}
		t.Fatalf("service.Engine has %d methods, over %d: %v", n, most, names)
	}
}
