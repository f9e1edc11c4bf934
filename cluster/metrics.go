package cluster

import (
	"context"
	"sync"
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
	*service.Metrics
	schedules service.ScheduleMetrics // Metrics.Schedules

	owned, listening          prometheus.GaugeFunc
	acquired, takeovers, lost prometheus.Counter
	tickFailures, keeps       prometheus.Counter
	flushSeconds, flushTimers prometheus.Histogram
	// flushDue and flushWhole count the flush statements run:
	// sqlFlushDue, sqlFlush (flushfast.go).
	flushStatements      *prometheus.CounterVec
	flushDue, flushWhole prometheus.Counter
	handed, givenBack    prometheus.Counter
	early                prometheus.Counter
	looksSkipped         prometheus.Counter
	// Leasing calls whose answer was lost (giveback.go): the calls, the
	// tasks given back, the calls left to their leases' expiry.
	lostCalls, lostGivenBack, lostLeft prometheus.Counter

	// The hops of a task from due to delivered (see hops).
	hopFired, hopFlushing, hopFlushed, hopNotified, hopReserved prometheus.Histogram
	hopDelivered                                                *prometheus.HistogramVec
	wakes                                                       wakeTimes
}

func newMetrics(n *Node) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &metrics{
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
		early:        counter("hourglass_cluster_flush_early_total", "Timers a flush found not yet due by the database's clock (this node's estimate of it ahead, or a lease renewed since), armed again for the rest."),
		looksSkipped: counter("hourglass_cluster_reserve_looks_skipped_total", "Reserves that waited without a statement: a look of their queue had just found it empty, and no task was made ready in it since."),
		givenBack:    counter("hourglass_cluster_flush_given_back_total", "Tasks a flush reserved for waiting reservers that had left, made ready again."),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_flush_seconds",
			Help:    "Time of one flush of fired timers (one round trip, fenced by the epochs).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100 µs to 3.3 s
		}),
		hopFired: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_hop_due_to_fired_seconds",
			Help:    "Per task made ready or handed over by this node's flush: from its timer's time to the wheel's firing, by the database's clock as this node estimates it.",
			Buckets: hopBuckets,
		}),
		hopFlushing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_hop_fired_to_flushing_seconds",
			Help:    "Per timer fired on this node (its partition's owner): from the wheel's firing to the start of the flush that carries it.",
			Buckets: hopBuckets,
		}),
		hopFlushed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_hop_due_to_flushed_seconds",
			Help:    "Per task made ready or handed over by this node's flush: from its timer's time to the flush's commit, by the database's clock as this node estimates it.",
			Buckets: hopBuckets,
		}),
		hopNotified: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_hop_flushed_to_notified_seconds",
			Help:    "Per task announced to the other nodes as ready (its commit left it to them: no waiter of this node took it): from the announcement's request to the commit of its NOTIFY.",
			Buckets: hopBuckets,
		}),
		hopReserved: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_hop_notified_to_reserved_seconds",
			Help:    "Per task taken by a reserve of this node woken by another node's notification: from the notification's arrival to the reserve statement's end.",
			Buckets: hopBuckets,
		}),
		hopDelivered: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_hop_due_to_delivered_seconds",
			Help:    "Per task delivered by this node, from due to hand-over by the database's clock as this node measures it, by the way it came: handed (reserved by this node's flush for a waiting reserver), notified (taken by a reserve woken by another node's notification), reserved (any other reserve).",
			Buckets: hopBuckets,
		}, []string{"path"}),
		flushTimers: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_cluster_timers_per_flush",
			Help:    "Fired timers carried by one flush.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 to 8192
		}),
	}
	m.flushStatements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hourglass_cluster_flush_statements_total",
		Help: "Statements of the flushes of fired timers, by kind: due (waiting tasks falling due, the common one), whole (leases ending, and tasks of queues with keys falling due for waiters here).",
	}, []string{"statement"})
	m.flushDue, m.flushWhole = m.flushStatements.WithLabelValues("due"), m.flushStatements.WithLabelValues("whole")
	m.lostCalls = counter("hourglass_cluster_lost_reserves_total", "Reserves (and flushes handing tasks over) whose answer was lost after the statement was sent: a deadline, a cancel or a broken connection.")
	m.lostGivenBack = counter("hourglass_cluster_lost_reserves_given_back_total", "Tasks leased by a reserve whose answer was lost, made ready again.")
	m.lostLeft = counter("hourglass_cluster_lost_reserves_left_total", "Reserves whose answer was lost that were not given back (over the bound of pending ones, or the node closed): their leases run out.")
	m.Metrics = service.NewMetrics(n.queueCounts,
		m.owned, m.listening, m.acquired, m.takeovers, m.lost, m.tickFailures, m.keeps, m.flushSeconds, m.flushTimers,
		m.flushStatements, m.handed, m.givenBack, m.early, m.looksSkipped, m.lostCalls, m.lostGivenBack, m.lostLeft, m.hopFired, m.hopFlushing, m.hopFlushed, m.hopNotified, m.hopReserved, m.hopDelivered)
	m.schedules = m.Schedules
	return m
}

// delivered counts k hand-overs of tasks due at dues and made ready at
// readies (database ns; 0, or readies nil: at due) at dbNow, which came
// by path (a label of hourglass_cluster_hop_due_to_delivered_seconds).
func (m *metrics) delivered(dues, readies []int64, dbNow int64, path string) {
	hop := m.hopDelivered.WithLabelValues(path)
	for i, due := range dues {
		var ready int64
		if readies != nil {
			ready = readies[i]
		}
		m.Delivered(service.SplitLateness(due, ready, dbNow))
		hop.Observe(max(time.Duration(dbNow-due), 0).Seconds())
	}
}

// Paths of a delivery (metrics.delivered).
const (
	pathHanded   = "handed"
	pathNotified = "notified"
	pathReserved = "reserved"
)

// The hops of a task on a cluster, each a histogram observed once per
// task that takes it, so that where the time goes from due to delivered
// shows on /metrics (issue 40):
//
//   - due → flushed, on the partition's owner: from the task's timer (its
//     due time, or its lease's end) to the commit of the flush that made
//     it ready or handed it to a waiting reserver of the owner; within
//     it, due → fired (the wheel's lateness, with this node's estimate of
//     the database's clock), fired → flushing, from the wheel's firing to
//     the start of that flush, and the flush's statement
//     (hourglass_cluster_flush_seconds);
//   - flushed → notified, on the node that made tasks ready that its own
//     waiters could not take: from its request to announce them to the
//     commit of the NOTIFY (the notifier's batch);
//   - notified → reserved, on a waiting node: from the notification's
//     arrival to the end of the reserve statement of the reserver it
//     woke;
//   - due → delivered, end to end, by the path the task came.
//
// hopBuckets spans 250 µs to about 4 s, a step of ×1.5: fine enough to
// tell 5 ms from 10 ms.
var hopBuckets = prometheus.ExponentialBuckets(0.00025, 1.5, 24)

// wakeTimes holds, for the queues whose waiting reservers a notification
// from another node woke, when the first such notification arrived, until
// a reserve on the queue has looked (hop notified → reserved). An entry
// lives from a wake to the look that follows it, microseconds; those
// whose reserver gave up instead are dropped once more than
// maxWakeTimes are kept and they are older than a second. It is safe for
// concurrent use.
type wakeTimes struct {
	mu sync.Mutex
	// at: queue → local time of the wake. Guarded by mu.
	at map[string]time.Time
}

// maxWakeTimes is how many entries wakeTimes keeps before it drops the
// stale ones.
const maxWakeTimes = 64

// woken records a wake of queue's reservers by a notification at now.
// O(1) amortised.
func (w *wakeTimes) woken(queue string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = make(map[string]time.Time)
	}
	if _, ok := w.at[queue]; ok {
		return
	}
	if len(w.at) >= maxWakeTimes {
		for q, t := range w.at {
			if now.Sub(t) > time.Second {
				delete(w.at, q)
			}
		}
		if len(w.at) >= maxWakeTimes {
			return
		}
	}
	w.at[queue] = now
}

// looked takes the wakes of queues off and returns the earliest; ok is
// false when none of queues was woken. O(len(queues)).
func (w *wakeTimes) looked(queues []string) (first time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range queues {
		if t, found := w.at[q]; found {
			delete(w.at, q)
			if !ok || t.Before(first) {
				first, ok = t, true
			}
		}
	}
	return first, ok
}

// queueCounts counts, for hourglass_queue_tasks when scraped, the tasks
// of the partitions n owns by queue and state: a scan of those
// partitions' rows, within 5 s. First it forgets the series of the
// queues gone (forgetGone).
func (n *Node) queueCounts() []task.QueueStats {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.forgetGone(ctx)
	parts, _ := n.members.arrays()
	if len(parts) == 0 {
		return nil
	}
	rows, err := n.db.Query(ctx, `SELECT queue,
			count(*) FILTER (WHERE state = 1 AND fire_at IS NOT NULL),
			count(*) FILTER (WHERE state = 1 AND fire_at IS NULL),
			count(*) FILTER (WHERE state = 2),
			count(*) FILTER (WHERE state = 3)
		FROM hourglass_tasks WHERE partition = ANY($1) GROUP BY queue`, parts)
	if err != nil {
		n.log.Warn("hourglass: counting tasks for the metrics failed", "err", err)
		return nil
	}
	defer rows.Close()
	var out []task.QueueStats
	for rows.Next() {
		var q task.QueueStats
		if err := rows.Scan(&q.Name, &q.Delayed, &q.Ready, &q.Reserved, &q.Dead); err != nil {
			return out
		}
		out = append(out, q)
	}
	return out
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
func (n *Node) forgetGone(ctx context.Context) {
	m := n.metrics
	qs := m.Queues()
	if len(qs) == 0 {
		return
	}
	rows, err := n.db.Query(ctx, sqlGone, qs)
	if err != nil {
		n.log.Warn("hourglass: looking for the queues gone, for the metrics, failed", "err", err)
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
