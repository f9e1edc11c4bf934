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

// TestSettled is the worked example of service/settle.go: the verdicts on
// a task of a queue {MaxAttempts: 3, DeadLetter: "q-dead"} reserved for
// the second time, and for the third, field by field.
func TestSettled(t *testing.T) {
	p := task.Policy{MaxAttempts: 3, DeadLetter: "q-dead"}
	second := service.Held{Attempts: 2, MaxAttempts: 3, Policy: p}
	third := service.Held{Attempts: 3, MaxAttempts: 3, Policy: p}
	boom, bad, expired := "boom", "bad", task.LeaseExpired
	prio := uint32(7)
	const u = 0.5 // no jitter: 1 − j + 2 j u = 1
	back := service.RetryDelay(nil, 2, u)
	ctx := context.Background()
	cases := []struct {
		name string
		s    service.Settlement
		h    service.Held
		want service.Verdict
	}{
		{"nack", service.Settlement{Outcome: task.AttemptNacked, Delay: task.RetryDelay, Error: &boom}, second, service.Verdict{
			Outcome: service.Outcome{Delay: back}, Attempt: task.AttemptNacked, AttemptError: "boom", LastError: &boom,
			Releases: 1, Nacked: true, Failed: true}},
		{"nack-delay", service.Settlement{Outcome: task.AttemptNacked, Delay: time.Minute}, second, service.Verdict{
			Outcome: service.Outcome{Delay: time.Minute}, Attempt: task.AttemptNacked, Releases: 1, Nacked: true, Failed: true}},
		{"nack-last", service.Settlement{Outcome: task.AttemptNacked, Delay: time.Minute, Error: &boom}, third, service.Verdict{
			Outcome: service.Outcome{Dead: true, DeadLetter: "q-dead"}, Attempt: task.AttemptNacked, AttemptError: "boom",
			LastError: &boom, Releases: 1, Nacked: true, Failed: true}},
		{"release-refund", service.Settlement{Outcome: task.AttemptReleased, Delay: time.Second, Refund: true}, third, service.Verdict{
			Outcome: service.Outcome{Delay: time.Second}, Attempt: task.AttemptReleased, Attempts: -1, Releases: 1, Nacked: true}},
		{"release-beanstalkd", service.Settlement{Outcome: task.AttemptReleased, Priority: &prio}, second, service.Verdict{
			Attempt: task.AttemptReleased, Priority: &prio, Releases: 1, Nacked: true}},
		{"bury", service.Settlement{Outcome: task.AttemptBuried, Error: &bad}, second, service.Verdict{
			Outcome: service.Outcome{Dead: true, DeadLetter: "q-dead"}, Attempt: task.AttemptBuried, AttemptError: "bad",
			LastError: &bad, Buries: 1, Failed: true}},
		{"bury-beanstalkd", service.Settlement{Outcome: task.AttemptBuried, Priority: &prio}, second, service.Verdict{
			Outcome: service.Outcome{Dead: true, DeadLetter: "q-dead"}, Attempt: task.AttemptBuried, Priority: &prio,
			Buries: 1, Failed: true}},
	}
	for _, c := range cases {
		got, err := service.Settled(ctx, c.s, c.h, u)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Settled = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	// A release of a task with no attempt counted gives none back.
	if got, _ := service.Settled(ctx, service.Settlement{Outcome: task.AttemptReleased, Refund: true}, service.Held{}, u); got.Attempts != 0 {
		t.Errorf("refund of no attempt: Attempts %d; want 0", got.Attempts)
	}
	// A nack settling a push records the push's outcome and status.
	pushed := service.WithPush(ctx, 503)
	if got, _ := service.Settled(pushed, service.Settlement{Outcome: task.AttemptNacked, Error: &boom}, second, u); got.Attempt != task.AttemptPushFailed || got.Status != 503 {
		t.Errorf("nack of a push: attempt %q status %d; want %q 503", got.Attempt, got.Status, task.AttemptPushFailed)
	}
	if _, err := service.Settled(ctx, service.Settlement{Outcome: service.Renewed}, second, u); !errors.Is(err, task.ErrInvalid) {
		t.Errorf("Settled(Renewed) = %v; want task.ErrInvalid", err)
	}

	// A lease that ran out: back at once in its place, or dead.
	want := service.Verdict{KeepDue: true, Attempt: task.AttemptExpired, AttemptError: expired, LastError: &expired,
		Timeouts: 1, Expired: true, Failed: true}
	if got := service.Expired(second, u); !reflect.DeepEqual(got, want) {
		t.Errorf("Expired(second) = %+v; want %+v", got, want)
	}
	want.KeepDue, want.Outcome = false, service.Outcome{Dead: true, DeadLetter: "q-dead"}
	if got := service.Expired(third, u); !reflect.DeepEqual(got, want) {
		t.Errorf("Expired(third) = %+v; want %+v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { service.Expired(second, u) }); n != 0 {
		t.Errorf("Expired allocates %v times; want none", n)
	}
	// With a retry back-off it comes back after it, due then.
	retry := task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2}
	got := service.Expired(service.Held{Attempts: 2, MaxAttempts: 3, Policy: task.Policy{Retry: &retry}}, u)
	if got.KeepDue || got.Delay != 2*time.Second || got.Due(100, 1000) != 1000+int64(2*time.Second) {
		t.Errorf("Expired under a back-off = %+v; want back after 2s, due then", got)
	}
	if d := (service.Verdict{}).Due(100, 1000); d != 1000 {
		t.Errorf("Due without KeepDue and no delay = %d; want now", d)
	}
	// Moved to its dead-letter queue: ready there, due by now at the
	// latest; dead in its queue: its due time kept.
	if d := want.Due(5000, 1000); d != 1000 {
		t.Errorf("Due of a task dead-lettered while due later = %d; want now, 1000", d)
	}
	if d := want.Due(100, 1000); d != 100 {
		t.Errorf("Due of a task dead-lettered = %d; want its own, 100", d)
	}
	if d := (service.Verdict{Outcome: service.Outcome{Dead: true}}).Due(5000, 1000); d != 5000 {
		t.Errorf("Due of a task dead in its queue = %d; want kept, 5000", d)
	}
	if d := (service.Verdict{KeepDue: true}).Due(100, 1000); d != 100 {
		t.Errorf("Due with KeepDue = %d; want 100, the due time kept", d)
	}
	if d := (service.Verdict{Outcome: service.Outcome{Delay: 1<<63 - 1}}).Due(100, 1000); d != 1<<63-1 {
		t.Errorf("Due saturates: %d", d)
	}
}

// TestExpiryByCounters: the verdicts on a lease that ran out depend on
// the task's counters alone without a retry back-off (or with one of no
// jitter) and without a dead-letter queue; with attempts left the task is
// back in its place, used up it dies.
func TestExpiryByCounters(t *testing.T) {
	for _, c := range []struct {
		p  task.Policy
		ok bool
	}{
		{task.Policy{}, true},
		{task.Policy{MaxAttempts: 3, Rate: &task.Rate{Limit: 1, Per: time.Second}}, true},
		{task.Policy{Retry: &task.Retry{}}, true},
		{task.Policy{Retry: &task.Retry{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1}}, false},
		{task.Policy{DeadLetter: "dead"}, false},
	} {
		left, usedUp, ok := service.ExpiryByCounters(c.p)
		if ok != c.ok {
			t.Errorf("%+v: ok %v, want %v", c.p, ok, c.ok)
		}
		if left.Dead || !usedUp.Dead || usedUp.Timeouts != 1 || left.Timeouts != 1 {
			t.Errorf("%+v: left %+v, used up %+v", c.p, left, usedUp)
		}
	}
	if left, _, _ := service.ExpiryByCounters(task.Policy{}); !left.KeepDue || left.Delay != 0 {
		t.Errorf("without a policy: left %+v; want back at once, its due time kept", left)
	}
}
