package broker

import (
	"fmt"
	"math"
	"slices"
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
func (b *Broker) ListTasks(queue string, st task.State, after uint64, limit int) ([]task.Task, uint64, error) {
	if err := service.CheckQueue(queue); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > 1000 {
		return nil, 0, fmt.Errorf("%w: limit must be 1 to 1000", task.ErrInvalid)
	}
	if st > task.Dead {
		return nil, 0, fmt.Errorf("%w: no state %d", task.ErrInvalid, st)
	}
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

// latencyWindow is the width of one window of the lateness history.
const latencyWindow = 10 * time.Second

// latencyWindows is how many windows the history keeps: 15 minutes.
const latencyWindows = 90

// latencyBuckets are the upper bounds of the lateness histogram of one
// window, in µs: powers of two from 1 µs to about 4.8 days
// (2^39 µs), so a quantile is reported within a factor of two.
const latencyBuckets = 40

// lateness is the history of delivery lateness. Guarded by Broker.mu.
type lateness struct {
	windows [latencyWindows]latencyCounts
}

type latencyCounts struct {
	start int64 // window start, Unix ns (a multiple of latencyWindow)
	n     [latencyBuckets]uint32
	max   time.Duration
}

// add records one delivery late by d at now. b.mu is held.
func (l *lateness) add(now time.Time, d time.Duration) {
	start := now.Truncate(latencyWindow).UnixNano()
	w := &l.windows[(start/int64(latencyWindow))%latencyWindows]
	if w.start != start {
		*w = latencyCounts{start: start}
	}
	us := max(d.Microseconds(), 1)
	i := min(int(math.Ceil(math.Log2(float64(us)))), latencyBuckets-1)
	w.n[i]++
	w.max = max(w.max, d)
}

// Lateness returns the lateness of the windows of the last 15 minutes
// that had deliveries, oldest first.
func (b *Broker) Lateness() []task.LatenessWindow {
	b.mu.Lock()
	ws := b.late.windows
	b.mu.Unlock()
	oldest := time.Now().Add(-latencyWindows * latencyWindow).UnixNano()
	var out []task.LatenessWindow
	for _, w := range ws {
		if w.start == 0 || w.start < oldest {
			continue
		}
		total := 0
		for _, c := range w.n {
			total += int(c)
		}
		if total == 0 {
			continue
		}
		q := func(p float64) time.Duration {
			want, seen := int(math.Ceil(p*float64(total))), 0
			for i, c := range w.n {
				if seen += int(c); seen >= want {
					return min(time.Duration(1<<i)*time.Microsecond, w.max)
				}
			}
			return w.max
		}
		out = append(out, task.LatenessWindow{Start: time.Unix(0, w.start).UTC(), Deliveries: total, P50: q(0.5), P99: q(0.99), Max: w.max})
	}
	slices.SortFunc(out, func(a, b task.LatenessWindow) int { return a.Start.Compare(b.Start) })
	return out
}

// DueHistogram counts the delayed tasks of queue (every queue for "")
// that fall due in each of n windows of width from now: counts[i] is the
// number due in [now+i·width, now+(i+1)·width). It scans every live task
// under the broker's lock: O(tasks), about 10 ms per million.
func (b *Broker) DueHistogram(queue string, width time.Duration, n int) (start time.Time, counts []int, err error) {
	if width <= 0 || n < 1 || n > 10000 {
		return time.Time{}, nil, fmt.Errorf("%w: width must be positive and n 1 to 10000", task.ErrInvalid)
	}
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
