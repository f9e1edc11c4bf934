package servicetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// RunScheduleLimit checks the bound on schedules over a service whose
// engine open made with a limit of limit schedules (limit ≥ 1): a new
// schedule past it is refused with task.ErrInvalid and changes nothing,
// a replacement of one that exists is never refused, and a deletion
// makes room again.
func RunScheduleLimit(t *testing.T, limit int, open func(t *testing.T) service.Service) {
	ctx := context.Background()
	s := open(t)
	spec := func(i int) task.ScheduleSpec {
		return task.ScheduleSpec{Name: fmt.Sprintf("s%d", i), Cron: "@every 1h", Queue: "q"}
	}
	for i := range limit {
		if _, created, err := s.SetSchedule(ctx, spec(i)); err != nil || !created {
			t.Fatalf("schedule %d of %d: created %v, %v", i+1, limit, created, err)
		}
	}
	_, _, err := s.SetSchedule(ctx, spec(limit))
	if !errors.Is(err, task.ErrInvalid) {
		t.Fatalf("a schedule past the limit of %d: %v; want ErrInvalid", limit, err)
	}
	if _, err := s.Schedule(ctx, spec(limit).Name); !errors.Is(err, task.ErrNoSchedule) {
		t.Fatalf("the refused schedule: %v; want ErrNoSchedule", err)
	}
	if all, err := s.Schedules(ctx); err != nil || len(all) != limit {
		t.Fatalf("after the refusal: %d schedules, %v; want %d", len(all), err, limit)
	}
	r := spec(0)
	r.Cron = "@every 2h"
	if _, created, err := s.SetSchedule(ctx, r); err != nil || created {
		t.Fatalf("a replacement at the limit: created %v, %v; want replaced", created, err)
	}
	if err := s.DeleteSchedule(ctx, spec(1).Name); err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.SetSchedule(ctx, spec(limit)); err != nil || !created {
		t.Fatalf("a schedule after a deletion made room: created %v, %v", created, err)
	}
}
