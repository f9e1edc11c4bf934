package service_test

import (
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestDedupes: a record dedupes while the queue has a window and both
// its own end and its finish plus the current window are ahead; the
// answer is the finished task.
func TestDedupes(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := task.Finished{ID: "x", JobID: 7, Queue: "q", Outcome: task.FinishedAcked, Finished: at, Attempts: 2, LastError: "e"}
	hour := task.Policy{Dedupe: time.Hour}
	until := service.DedupeUntil(hour, at)
	if !until.Equal(at.Add(time.Hour)) || !service.DedupeUntil(task.Policy{}, at).IsZero() {
		t.Fatalf("DedupeUntil: %v, and without a window %v", until, service.DedupeUntil(task.Policy{}, at))
	}
	for _, c := range []struct {
		what  string
		p     task.Policy
		now   time.Time
		until time.Time
		want  bool
	}{
		{"within", hour, at.Add(59 * time.Minute), until, true},
		{"at the end", hour, at.Add(time.Hour), until, false},
		{"after", hour, at.Add(2 * time.Hour), until, false},
		{"window removed", task.Policy{}, at.Add(time.Minute), until, false},
		{"window shortened", task.Policy{Dedupe: time.Minute}, at.Add(2 * time.Minute), until, false},
		{"window lengthened: the record's own end", task.Policy{Dedupe: 3 * time.Hour}, at.Add(2 * time.Hour), until, false},
	} {
		if got := service.Dedupes(c.p, f, c.until, c.now); got != c.want {
			t.Errorf("%s: Dedupes = %v, want %v", c.what, got, c.want)
		}
	}
	d := service.DedupedTask(f)
	if d.State != task.Done || d.State.String() != "finished" || d.ID != "x" || d.JobID != 7 || d.Outcome != task.FinishedAcked ||
		!d.Finished.Equal(at) || d.Attempts != 2 || d.LastError != "e" {
		t.Fatalf("DedupedTask = %+v", d)
	}
}
