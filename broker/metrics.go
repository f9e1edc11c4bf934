package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus metrics, named by the conventions
// (base units, _total counters, _seconds histograms). They are updated
// whether or not a registry collects them.
type metrics struct {
	b          *Broker
	registerer prometheus.Registerer

	TaskMetrics
	commitSeconds  prometheus.Histogram
	tasksPerCommit prometheus.Histogram
	states         *prometheus.Desc
}

// TaskMetrics are the metrics of a task's life that every server of the
// API keeps under the same names, help and buckets (the embedded broker
// here, a cluster node in package cluster), so that dashboards and alerts
// work on either. Each is safe for concurrent use.
type TaskMetrics struct {
	Puts, Deliveries, Acks, Nacks, LeaseExpiries, Dead prometheus.Counter
	// Lateness is the time from due time to hand-over, in seconds.
	Lateness prometheus.Histogram
}

// NewTaskMetrics returns a fresh set of [TaskMetrics], registered nowhere.
func NewTaskMetrics() TaskMetrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return TaskMetrics{
		Puts:          counter("hourglass_tasks_put_total", "Tasks put (new or replacing)."),
		Deliveries:    counter("hourglass_tasks_delivered_total", "Tasks handed to a reserver."),
		Acks:          counter("hourglass_tasks_acked_total", "Tasks acknowledged."),
		Nacks:         counter("hourglass_tasks_nacked_total", "Reservations given back with nack."),
		LeaseExpiries: counter("hourglass_lease_expiries_total", "Reservations whose lease ran out."),
		Dead:          counter("hourglass_tasks_dead_total", "Tasks that used up their attempts."),
		Lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_delivery_lateness_seconds",
			Help:    "Time from a task's due time to its hand-over to a reserver (waiting for a reserver included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20), // 100 µs to 52 s
		}),
	}
}

// Collectors returns the metrics, to register.
func (t TaskMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{t.Puts, t.Deliveries, t.Acks, t.Nacks, t.LeaseExpiries, t.Dead, t.Lateness}
}

// Register registers every one of cs with r, or none: on an error it
// takes back those it registered.
func Register(r prometheus.Registerer, cs []prometheus.Collector) error {
	for i, c := range cs {
		if err := r.Register(c); err != nil {
			for _, c := range cs[:i] {
				r.Unregister(c)
			}
			return err
		}
	}
	return nil
}

func newMetrics(b *Broker) *metrics {
	return &metrics{
		b:           b,
		TaskMetrics: NewTaskMetrics(),
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
		states: prometheus.NewDesc("hourglass_queue_tasks",
			"Tasks in a queue by state.", []string{"queue", "state"}, nil),
	}
}

func (m *metrics) all() []prometheus.Collector {
	return append(m.Collectors(), m.commitSeconds, m.tasksPerCommit, stateCollector{m})
}

func (m *metrics) register(r prometheus.Registerer) error {
	if err := Register(r, m.all()); err != nil {
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

// delivered counts one hand-over, late by late (clamped at zero).
func (m *metrics) delivered(late time.Duration) {
	m.Deliveries.Inc()
	m.Lateness.Observe(max(late, 0).Seconds())
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
	for _, q := range c.m.b.Queues() {
		for _, s := range [...]struct {
			name string
			n    int
		}{{"delayed", q.Delayed}, {"ready", q.Ready}, {"reserved", q.Reserved}, {"dead", q.Dead}} {
			ch <- prometheus.MustNewConstMetric(c.m.states, prometheus.GaugeValue, float64(s.n), q.Name, s.name)
		}
	}
}
