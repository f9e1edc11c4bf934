package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestFilter_Match: each bound of a filter, at its edge: the afters take
// their time, the befores do not.
func TestFilter_Match(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tk := task.Task{ID: "order-17", State: task.Dead, Due: at, Created: at, LastError: "read timeout after 5s"}
	for _, c := range []struct {
		name string
		f    service.Filter
		want bool
	}{
		{"zero", service.Filter{}, true},
		{"state", service.Filter{State: task.Dead}, true},
		{"other state", service.Filter{State: task.Ready}, false},
		{"error substring", service.Filter{Error: "timeout"}, true},
		{"error case", service.Filter{Error: "Timeout"}, false},
		{"prefix", service.Filter{IDPrefix: "order-"}, true},
		{"not a prefix", service.Filter{IDPrefix: "rder"}, false},
		{"due after, at", service.Filter{DueAfter: at}, true},
		{"due after, later", service.Filter{DueAfter: at.Add(time.Nanosecond)}, false},
		{"due before, at", service.Filter{DueBefore: at}, false},
		{"due before, later", service.Filter{DueBefore: at.Add(time.Nanosecond)}, true},
		{"created after, at", service.Filter{CreatedAfter: at}, true},
		{"created before, at", service.Filter{CreatedBefore: at}, false},
		{"all", service.Filter{State: task.Dead, Error: "timeout", IDPrefix: "order", DueAfter: at, DueBefore: at.Add(1), CreatedAfter: at, CreatedBefore: at.Add(1)}, true},
	} {
		if got := c.f.Match(tk); got != c.want {
			t.Errorf("%s: Match = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFront_BulkChecks: a bad filter or bulk request never reaches the
// engine (whose methods here panic), and its error names the parameter.
func TestFront_BulkChecks(t *testing.T) {
	s := service.New(&engine{})
	ctx := context.Background()
	now := time.Now()
	for _, c := range []struct {
		name, word string
		err        error
	}{
		{"error", "error", func() error {
			_, err := s.Bulk(ctx, "q", service.BulkRequest{Action: service.Delete, Filter: service.Filter{Error: string(make([]byte, service.MaxFilterText+1))}})
			return err
		}()},
		{"due", "due_after", func() error {
			_, err := s.Bulk(ctx, "q", service.BulkRequest{Action: service.Kick, Filter: service.Filter{DueAfter: now, DueBefore: now}})
			return err
		}()},
		{"created", "created_before", func() error {
			_, _, err := s.FindTasks(ctx, "q", service.Filter{CreatedBefore: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, service.Cursor{}, 10)
			return err
		}()},
		{"limit", "limit", func() error {
			_, _, err := s.FindTasks(ctx, "q", service.Filter{}, service.Cursor{}, task.MaxList+1)
			return err
		}()},
		{"to", "to", func() error {
			_, err := s.Bulk(ctx, "q", service.BulkRequest{Action: service.Move, To: "q"})
			return err
		}()},
		{"action", "action", func() error { _, err := s.Bulk(ctx, "q", service.BulkRequest{}); return err }()},
	} {
		if !errors.Is(c.err, task.ErrInvalid) || !strings.Contains(c.err.Error(), c.word) {
			t.Errorf("%s: %v; want ErrInvalid naming %s", c.name, c.err, c.word)
		}
	}
}
