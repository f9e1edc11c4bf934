package broker

import (
	"context"
	"time"

	"github.com/hourglass-go/hourglass/service"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus metrics, named by the conventions
// (base units, _total counters, _seconds histograms). They are updated
// whether or not a registry collects them.
type metrics struct {
	b          *Broker
	registerer prometheus.Registerer

	service.TaskMetrics
	schedules      service.ScheduleMetrics
	commitSeconds  prometheus.Histogram
	tasksPerCommit prometheus.Histogram
	// kept and read count the tasks reserves took in memory (recent.go,
	// or the overlay) and those whose records they read from the store.
	kept, read prometheus.CounterFunc
	states     *prometheus.Desc
}

func newMetrics(b *Broker) *metrics {
	return &metrics{
		b:           b,
		TaskMetrics: service.NewTaskMetrics(),
		schedules:   service.NewScheduleMetrics(),
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
		kept: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hourglass_reserve_records_kept_total",
			Help: "Tasks reserved whose record and payload were in memory (kept when committed, due soon, or not yet committed): nothing read from the store.",
		}, func() float64 { return b.recentCount(true) }),
		read: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hourglass_reserve_records_read_total",
			Help: "Tasks reserved whose record and payload were read from the store (not kept in memory, or the budget spent).",
		}, func() float64 { return b.recentCount(false) }),
		states: service.QueueTasksDesc,
	}
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

func (m *metrics) all() []prometheus.Collector {
	return append(append(m.Collectors(), m.schedules.Collectors()...), m.commitSeconds, m.tasksPerCommit, m.kept, m.read, stateCollector{m})
}

func (m *metrics) register(r prometheus.Registerer) error {
	if err := service.Register(r, m.all()); err != nil {
		return err
	}
	m.registerer = r
	return nil
}

func (m *metrics) unregister() {
	for _, c := range m.all() {
		m.registerer.Unregister(c)
	}
}

// delivered counts one hand-over, late by late, of which ready was the
// server's (service.SplitLateness).
func (m *metrics) delivered(late, ready time.Duration) {
	m.Deliveries.Inc()
	m.Delivered(late, ready)
}

// commit records one group commit of tasks task writes.
func (m *metrics) commit(took time.Duration, tasks int) {
	m.commitSeconds.Observe(took.Seconds())
	m.tasksPerCommit.Observe(float64(tasks))
}

// stateCollector reports the per-queue state gauges from the broker's
// counts when scraped.
type stateCollector struct{ m *metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.states }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	qs, _ := c.m.b.Queues(context.Background()) // never fails
	for _, q := range qs {
		service.CollectQueueTasks(ch, c.m.states, q)
	}
}
