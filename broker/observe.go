package broker

import (
	"context"
	"math"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// The methods in this file are for looking at the queue (the dashboard):
// pages of tasks, delivery lateness over the last minutes, and when
// delayed tasks fall due.

// Lateness returns the lateness of the windows of the last 15 minutes
// that had deliveries, oldest first.
func (b *Broker) Lateness(ctx context.Context) ([]task.LatenessWindow, error) {
	now := time.Now()
	b.mu.Lock()
	counts := b.late.Counts(now)
	b.mu.Unlock()
	return service.MergeLateness(now, counts), nil
}

// DueHistogram counts the delayed tasks of queue (every queue for "")
// that fall due in each of n windows of width from now: counts[i] is the
// number due in [now+i·width, now+(i+1)·width). It scans every live task
// under the broker's lock: O(tasks).
func (b *Broker) DueHistogram(ctx context.Context, queue string, width time.Duration, n int) (start time.Time, counts []int, err error) {
	counts = make([]int, n)
	b.mu.Lock()
	defer b.mu.Unlock()
	qi := uint32(math.MaxUint32)
	if queue != "" {
		q, ok := b.byName[queue]
		if !ok {
			return time.Now().UTC(), counts, nil
		}
		qi = q.index
	}
	now := time.Now()
	from := now.UnixNano()
	b.tasks.each(func(_ uint64, s slot) bool {
		if s.state() != task.Delayed || (qi != math.MaxUint32 && s.queue() != qi) {
			return true
		}
		if i, ok := service.DueWindow(s.due, from, width, n); ok {
			counts[i]++
		}
		return true
	})
	return now.UTC(), counts, nil
}
