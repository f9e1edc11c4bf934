package broker

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus metrics: service.Metrics, which
// both engines serve and to which the broker reports events, and the
// broker's own, its group commits and where reserves found their records.
// They are updated whether or not a registry collects them.
type metrics struct {
	*service.Metrics
	schedules      service.ScheduleMetrics // Metrics.Schedules
	commitSeconds  prometheus.Histogram
	tasksPerCommit prometheus.Histogram
}

func newMetrics(b *Broker) *metrics {
	m := &metrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_store_commit_seconds",
			Help:    "Time to commit one group of writes durably (the store may cover several groups with one fsync).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16), // 50 µs to 1.6 s
		}),
		tasksPerCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_store_tasks_per_commit",
			Help:    "Task writes carried by one durable commit (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 to 8192
		}),
	}
	// kept and read count the tasks reserves took in memory (recent.go,
	// or the overlay) and those whose records they read from the store.
	kept := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hourglass_reserve_records_kept_total",
		Help: "Tasks reserved whose record and payload were in memory (kept when committed, due soon, or not yet committed): nothing read from the store.",
	}, func() float64 { return b.recentCount(true) })
	read := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hourglass_reserve_records_read_total",
		Help: "Tasks reserved whose record and payload were read from the store (not kept in memory, or the budget spent).",
	}, func() float64 { return b.recentCount(false) })
	queueTasks := func() []task.QueueStats {
		qs, _ := b.Queues(context.Background()) // never fails
		return qs
	}
	m.Metrics = service.NewMetrics(queueTasks, m.commitSeconds, m.tasksPerCommit, kept, read)
	m.schedules = m.Schedules
	return m
}

// recentCount returns how many reserved tasks' records were taken from
// those kept (kept) or read from the store (!kept).
func (b *Broker) recentCount(kept bool) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if kept {
		return float64(b.recent.hits)
	}
	return float64(b.recent.misses)
}

// commit records one group commit of tasks task writes.
func (m *metrics) commit(took time.Duration, tasks int) {
	m.commitSeconds.Observe(took.Seconds())
	m.tasksPerCommit.Observe(float64(tasks))
}
