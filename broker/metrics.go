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

	puts, deliveries, acks, nacks, leaseExpiries, dead prometheus.Counter
	lateness                                           prometheus.Histogram
	commitSeconds                                      prometheus.Histogram
	tasksPerCommit                                     prometheus.Histogram
	states                                             *prometheus.Desc
}

func newMetrics(b *Broker) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &metrics{
		b:             b,
		puts:          counter("hourglass_tasks_put_total", "Tasks put (new or replacing)."),
		deliveries:    counter("hourglass_tasks_delivered_total", "Tasks handed to a reserver."),
		acks:          counter("hourglass_tasks_acked_total", "Tasks acknowledged."),
		nacks:         counter("hourglass_tasks_nacked_total", "Reservations given back with nack."),
		leaseExpiries: counter("hourglass_lease_expiries_total", "Reservations whose lease ran out."),
		dead:          counter("hourglass_tasks_dead_total", "Tasks that used up their attempts."),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_delivery_lateness_seconds",
			Help:    "Time from a task's due time to its hand-over to a reserver (waiting for a reserver included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20), // 100 µs to 52 s
		}),
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
	return []prometheus.Collector{m.puts, m.deliveries, m.acks, m.nacks, m.leaseExpiries, m.dead,
		m.lateness, m.commitSeconds, m.tasksPerCommit, stateCollector{m}}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for i, c := range m.all() {
		if err := r.Register(c); err != nil {
			for _, c := range m.all()[:i] {
				r.Unregister(c)
			}
			return err
		}
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
	m.deliveries.Inc()
	m.lateness.Observe(max(late, 0).Seconds())
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
