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

// ListTasks returns up to limit tasks of queue in state st (0: any), by
// job id above after, without payloads, and the cursor for the next page
// (0 when there is none). A page reads at most 10×limit records, so with
// a rare state it may be short or empty yet have a next page. limit must
// be 1 to 1000.
func (b *Broker) ListTasks(ctx context.Context, queue string, st task.State, after uint64, limit int) ([]task.Task, uint64, error) {
	var out []task.Task
	budget := 10 * limit
	for budget > 0 && len(out) < limit {
		recs, err := b.st.List(queue, after, min(budget, 1000))
		if err != nil {
			return nil, 0, err
		}
		budget -= len(recs)
		b.mu.Lock()
		for _, rec := range recs {
			after = rec.JobID
			s, ok := b.tasks.get(rec.JobID)
			if !ok || (st != 0 && s.state() != st) {
				continue
			}
			if p, ok := b.over.tasks[rec.JobID]; ok && !p.gone {
				rec = p.t
				rec.Payload = nil
				if rec.Queue != queue {
					continue // moved to its dead-letter queue, not yet committed
				}
			}
			out = append(out, view(rec, s))
			if len(out) == limit {
				break
			}
		}
		b.mu.Unlock()
		if len(recs) == 0 {
			return out, 0, nil
		}
	}
	return out, after, nil
}

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
		if i := (s.due - from) / int64(width); i >= 0 && i < int64(n) {
			counts[i]++
		}
		return true
	})
	return now.UTC(), counts, nil
}
