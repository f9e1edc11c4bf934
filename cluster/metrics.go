package cluster

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a node's Prometheus metrics. Where a metric of package
// broker applies to a node it has the broker's name, help and buckets, so
// that dashboards and alerts work on either (each node counts what it
// served; sum over nodes for the cluster): hourglass_tasks_put_total,
// _delivered_total, _acked_total, _nacked_total, _dead_total,
// hourglass_lease_expiries_total (counted by the partition's owner, which
// settles the lease) and hourglass_delivery_lateness_seconds (due time to
// hand-over, by the database's clock as this node measures it).
//
// hourglass_queue_tasks counts, when scraped, the tasks of the partitions
// this node owns by queue and state (a scan of those partitions' rows), so
// that the sum over the nodes is the cluster's. Not served by a node: the
// embedded engine's group-commit histograms (each request commits on its
// own; PostgreSQL groups the WAL flushes). The per-queue counters
// (retries, throttled reserves, dead-lettered tasks) lose the series of
// a queue once it no longer exists, at the next scrape (forgetGone).
//
// Of the cluster's own, under hourglass_cluster_: the channels the node
// listens to (notifications.go), partitions held, those
// acquired and taken over from a node whose lease ran out, those lost
// (lease not renewed in time, or fenced out), lease-loop rounds that
// failed (the database unreachable, e.g. during a failover), and the
// owner's flush: its round trip, timers per flush, tasks it handed to
// this node's waiting reservers and those it gave back (their reservers
// had left).
//
// The metrics are updated whether or not a registry collects them; each
// is safe for concurrent use.
type metrics struct {
	registerer prometheus.Registerer

	service.TaskMetrics
	schedules service.ScheduleMetrics

	owned, listening          prometheus.GaugeFunc
	acquired, takeovers, lost prometheus.Counter
	tickFailures, keeps       prometheus.Counter
	flushSeconds, flushTimers prometheus.Histogram
	handed, givenBack         prometheus.Counter
	states                    queueStates
}

func newMetrics(n *Node) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &metrics{
		TaskMetrics: service.NewTaskMetrics(),
		schedules:   service.NewScheduleMetrics(),
		owned: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hourglass_cluster_partitions_owned",
			Help: "Partitions whose lease this node holds.",
		}, func() float64 {
			return float64(n.members.count())
		}),
		listening: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hourglass_cluster_listen_channels",
			Help: "Channels this node LISTENs to: a fixed few and its partitions', whatever the queues waited on.",
		}, func() float64 {
			return float64(n.notifications.listening())
		}),
		acquired:     counter("hourglass_cluster_partitions_acquired_total", "Partitions acquired (free, released or taken over)."),
		takeovers:    counter("hourglass_cluster_takeovers_total", "Partitions acquired from a node whose lease ran out."),
		lost:         counter("hourglass_cluster_partitions_lost_total", "Partitions lost: lease not renewed in time, or fenced out of a flush."),
		tickFailures: counter("hourglass_cluster_lease_tick_failures_total", "Rounds of the lease loop that failed (database unreachable)."),
		keeps:        counter("hourglass_cluster_lease_keeps_total", "Renewals of the heartbeat and leases made during a lease round that ran past a third of a lease (a slow database)."),
		handed:       counter("hourglass_cluster_flush_handed_total", "Tasks a flush reserved for, and handed to, this node's waiting reservers."),
		givenBack:    counter("hourglass_cluster_flush_given_back_total", "Tasks a flush reserved for waiting reservers that had left, made ready again."),
		states:       queueStates{n: n, desc: service.QueueTasksDesc},
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_flush_seconds",
			Help:    "Time of one flush of fired timers (one round trip, fenced by the epochs).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100 µs to 3.3 s
		}),
		flushTimers: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_timers_per_flush",
			Help:    "Fired timers carried by one flush.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 to 8192
		}),
	}
}

func (m *metrics) all() []prometheus.Collector {
	return append(append(m.Collectors(), m.schedules.Collectors()...),
		m.owned, m.listening, m.acquired, m.takeovers, m.lost, m.tickFailures, m.keeps, m.flushSeconds, m.flushTimers,
		m.handed, m.givenBack, m.states)
}

// register registers every metric with r, or none.
func (m *metrics) register(r prometheus.Registerer) error {
	if err := service.Register(r, m.all()); err != nil {
		return err
	}
	m.registerer = r
	return nil
}

// unregister takes the metrics off the registry they were registered
// with, if any.
func (m *metrics) unregister() {
	if m.registerer == nil {
		return
	}
	for _, c := range m.all() {
		m.registerer.Unregister(c)
	}
}

// delivered counts k hand-overs of tasks due at dues and made ready at
// readies (database ns; 0: at due) at dbNow.
func (m *metrics) delivered(dues, readies []int64, dbNow int64) {
	m.Deliveries.Add(float64(len(dues)))
	for i, due := range dues {
		m.Delivered(service.SplitLateness(due, readies[i], dbNow))
	}
}

// queueStates is the collector of hourglass_queue_tasks: the tasks of the
// partitions n owns, by queue and state, counted when scraped.
type queueStates struct {
	n    *Node
	desc *prometheus.Desc
}

func (c queueStates) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c queueStates) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.forgetGone(ctx)
	parts, _ := c.n.members.arrays()
	if len(parts) == 0 {
		return
	}
	rows, err := c.n.db.Query(ctx, `SELECT queue,
			count(*) FILTER (WHERE state = 1 AND fire_at IS NOT NULL),
			count(*) FILTER (WHERE state = 1 AND fire_at IS NULL),
			count(*) FILTER (WHERE state = 2),
			count(*) FILTER (WHERE state = 3)
		FROM hourglass_tasks WHERE partition = ANY($1) GROUP BY queue`, parts)
	if err != nil {
		c.n.log.Warn("hourglass: counting tasks for the metrics failed", "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var q task.QueueStats
		if err := rows.Scan(&q.Name, &q.Delayed, &q.Ready, &q.Reserved, &q.Dead); err != nil {
			return
		}
		service.CollectQueueTasks(ch, c.desc, q)
	}
}

// sqlGone returns those of the queues $1 that no longer exist: no task,
// no pause running, no policy. One index probe or two a queue.
var sqlGone = `SELECT q FROM unnest($1::text[]) AS q
	WHERE NOT EXISTS (SELECT 1 FROM hourglass_tasks t WHERE t.queue = q)
	AND NOT EXISTS (SELECT 1 FROM hourglass_queues p WHERE p.queue = q
		AND (p.paused_until > hourglass_now() OR num_nonnulls(` + policyColumnsOf("p") + `) > 0))`

// forgetGone deletes the per-queue series (service.TaskMetrics.ForgetQueue)
// of the queues that no longer exist. A node does not see a queue go (its
// last task may be acked on another node), so it looks when scraped: a
// series outlives its queue by one scrape at most. O(queues with series).
func (c queueStates) forgetGone(ctx context.Context) {
	m := c.n.metrics
	qs := m.Queues()
	if len(qs) == 0 {
		return
	}
	rows, err := c.n.db.Query(ctx, sqlGone, qs)
	if err != nil {
		c.n.log.Warn("hourglass: looking for the queues gone, for the metrics, failed", "err", err)
		return
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, q := range gone {
		m.ForgetQueue(q)
	}
}
