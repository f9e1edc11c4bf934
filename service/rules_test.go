package service_test

import (
	"testing"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestUrgent: a ready task is urgent below task.DefaultPriority
// (beanstalkd's 1024), not at it.
func TestUrgent(t *testing.T) {
	for _, c := range []struct {
		prio uint32
		want bool
	}{{0, true}, {task.DefaultPriority - 1, true}, {task.DefaultPriority, false}, {1<<32 - 1, false}} {
		if got := service.Urgent(c.prio); got != c.want {
			t.Errorf("Urgent(%d) = %v, want %v", c.prio, got, c.want)
		}
	}
}

// TestHeldBy: a full queue counts as held by its concurrency whatever
// its rate, a spent rate next, and per-key limits alone count nothing.
func TestHeldBy(t *testing.T) {
	for _, c := range []struct {
		full, spent bool
		want        string
	}{{true, true, service.ThrottledConcurrency}, {true, false, service.ThrottledConcurrency},
		{false, true, service.ThrottledRate}, {false, false, ""}} {
		if got := service.HeldBy(c.full, c.spent); got != c.want {
			t.Errorf("HeldBy(full %v, spent %v) = %q, want %q", c.full, c.spent, got, c.want)
		}
	}
}
