package service

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hourglass-go/hourglass/task"
)

// TaskMetrics are the metrics of a task's life that both engines keep
// under the same names, help and buckets, so that dashboards and alerts
// work on either. What each counts is written once, in the methods by
// which an engine reports the events (Put, Delivered, Acked, Nacked,
// Expired, Failed, HeldBack): an engine reports what happened and
// touches no metric itself. Each is safe for concurrent use.
type TaskMetrics struct {
	Puts, Deliveries, Acks, Nacks, LeaseExpiries, Dead prometheus.Counter
	// Lateness is the time from due time to hand-over, in seconds: the
	// sum of ReadyLateness (due to ready, the server's own) and ReadyWait
	// (ready to hand-over, the wait for a worker); see lateness.go.
	Lateness, ReadyLateness, ReadyWait prometheus.Histogram
	// Retries counts, per queue, failed attempts (a nack, a lease that
	// ran out) after which the task comes back; Throttled, per queue and
	// reason ("rate", "concurrency"), the reserves that a queue's limit
	// held back; DeadLettered, per queue, the tasks that died there and
	// moved to its dead-letter queue. Their series number one per queue
	// that exists and saw the event: an engine deletes a queue's series
	// when the queue goes (ForgetQueue).
	Retries, Throttled, DeadLettered *prometheus.CounterVec
}

// Put counts n tasks put, new or replacing a task (a schedule's
// occurrences and runs included); a put answered by a live task or a
// dedupe window is none. O(1).
func (t TaskMetrics) Put(n int) { t.Puts.Add(float64(n)) }

// Delivered counts one hand-over of a task to a reserver, late by late
// after its due time, of which ready was the server's (see
// [SplitLateness]). O(buckets).
func (t TaskMetrics) Delivered(late, ready time.Duration) {
	t.Deliveries.Inc()
	t.Lateness.Observe(late.Seconds())
	t.ReadyLateness.Observe(ready.Seconds())
	t.ReadyWait.Observe((late - ready).Seconds())
}

// Acked counts n tasks acknowledged (an ack, or beanstalkd's delete of
// a job its caller reserved). O(1).
func (t TaskMetrics) Acked(n int) { t.Acks.Add(float64(n)) }

// Nacked counts one reservation given back by a nack or a release; a
// bury, and a lease that ran out, are none. O(1).
func (t TaskMetrics) Nacked() { t.Nacks.Inc() }

// Expired counts n reservations whose lease ran out. O(1).
func (t TaskMetrics) Expired(n int) { t.LeaseExpiries.Add(float64(n)) }

// Failed counts n failed attempts of tasks of queue (a nack, a bury, a
// lease that ran out; a release spends no attempt and is none) as
// AfterFailure decided them: the tasks came back (a retry of queue), or
// died (dead), moved to queue's dead-letter queue or not (deadLettered,
// counted by the queue they left). A task that an engine finds damaged
// in its store, and makes dead, is one that died. O(1).
func (t TaskMetrics) Failed(queue string, n int, dead, deadLettered bool) {
	switch {
	case n <= 0:
		// No series for a queue that saw no such event.
	case !dead:
		t.Retries.WithLabelValues(queue).Add(float64(n))
	default:
		t.Dead.Add(float64(n))
		if deadLettered {
			t.DeadLettered.WithLabelValues(queue).Add(float64(n))
		}
	}
}

// HeldBack counts one reserve of queue that its limit held back, for
// reason (ThrottledRate or ThrottledConcurrency). O(1).
func (t TaskMetrics) HeldBack(queue, reason string) {
	t.Throttled.WithLabelValues(queue, reason).Inc()
}

// Reasons of TaskMetrics.Throttled.
const (
	ThrottledRate        = "rate"
	ThrottledConcurrency = "concurrency"
)

// HeldBy names the limit that held back a queue, not paused and with
// ready tasks left, from a reserve that took fewer tasks than it asked
// for (both engines ask it after their take, of every queue the reserve
// named): its concurrency (ThrottledConcurrency) when as many of its
// tasks are reserved as the limit allows (full), else its rate
// (ThrottledRate) when its bucket has no whole token left (rateSpent),
// else none (""): a queue held back by its per-key limits alone counts
// nothing. What TaskMetrics.HeldBack counts. O(1).
func HeldBy(full, rateSpent bool) string {
	switch {
	case full:
		return ThrottledConcurrency
	case rateSpent:
		return ThrottledRate
	}
	return ""
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
		Dead:          counter("hourglass_tasks_dead_total", "Tasks that died: used up their attempts, or buried (in their queue or moved to its dead-letter queue)."),
		Lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_delivery_lateness_seconds",
			Help:    "Time from a task's due time to its hand-over to a reserver (waiting for a reserver included): hourglass_ready_lateness_seconds plus hourglass_ready_wait_seconds.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20), // 100 µs to 52 s
		}),
		ReadyLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_ready_lateness_seconds",
			Help:    "The server's own lateness of a task handed out: from its due time to when it was ready (0 for a task ready at once).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
		}),
		ReadyWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_ready_wait_seconds",
			Help:    "Time a ready task waited for a worker (no reserver asking, or the queue paused or limited): from ready to its hand-over.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
		}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_task_retries_total",
			Help: "Failed attempts (nack, lease expired) after which the task comes back, by queue.",
		}, []string{"queue"}),
		Throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_reserves_throttled_total",
			Help: "Reserves that a queue's rate or concurrency limit held back, by queue and reason.",
		}, []string{"queue", "reason"}),
		DeadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_tasks_dead_lettered_total",
			Help: "Tasks that died in a queue and moved to its dead-letter queue, by queue.",
		}, []string{"queue"}),
	}
}

// ForgetQueue deletes queue's series of the per-queue metrics (Retries,
// Throttled, DeadLettered): a queue that no longer exists has none, so
// that the series number one per queue that exists, not one per name
// ever used. O(series of the metric) for Throttled, O(1) for the others.
func (t TaskMetrics) ForgetQueue(queue string) {
	t.Retries.DeleteLabelValues(queue)
	t.Throttled.DeletePartialMatch(prometheus.Labels{"queue": queue})
	t.DeadLettered.DeleteLabelValues(queue)
}

// Queues returns the queues that have series of the per-queue metrics
// (Retries, Throttled, DeadLettered), each once, for an engine to forget
// those of queues that no longer exist. O(series).
func (t TaskMetrics) Queues() []string {
	seen := make(map[string]bool)
	ch := make(chan prometheus.Metric, 64)
	go func() {
		t.Retries.Collect(ch)
		t.Throttled.Collect(ch)
		t.DeadLettered.Collect(ch)
		close(ch)
	}()
	var out []string
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if q := l.GetValue(); l.GetName() == "queue" && !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	return out
}

// Collectors returns the metrics, to register.
func (t TaskMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{t.Puts, t.Deliveries, t.Acks, t.Nacks, t.LeaseExpiries, t.Dead, t.Lateness, t.ReadyLateness, t.ReadyWait,
		t.Retries, t.Throttled, t.DeadLettered}
}

// Metrics are the metrics every engine serves, beside its own: the
// task metrics, the schedules' and hourglass_queue_tasks, whose samples
// come from the engine's count of its tasks by queue and state when
// scraped. An engine reports events to TaskMetrics and Schedules, and
// registers its own collectors with these (Register). Safe for
// concurrent use.
type Metrics struct {
	TaskMetrics
	Schedules ScheduleMetrics
	all       []prometheus.Collector

	mu         sync.Mutex
	registerer prometheus.Registerer // guarded by mu
}

// NewMetrics returns an engine's metrics, registered nowhere:
// queueTasks counts its tasks by queue and state (called at each scrape,
// it bounds its own time), and own are the engine's own collectors, to
// register and unregister with the shared ones.
func NewMetrics(queueTasks func() []task.QueueStats, own ...prometheus.Collector) *Metrics {
	m := &Metrics{TaskMetrics: NewTaskMetrics(), Schedules: NewScheduleMetrics()}
	m.all = append(append(append(m.Collectors(), m.Schedules.Collectors()...), queueTasksCollector(queueTasks)), own...)
	return m
}

// Register registers every metric with r, or none.
func (m *Metrics) Register(r prometheus.Registerer) error {
	if err := Register(r, m.all); err != nil {
		return err
	}
	m.mu.Lock()
	m.registerer = r
	m.mu.Unlock()
	return nil
}

// Unregister takes the metrics off the registry Register gave, if any.
func (m *Metrics) Unregister() {
	m.mu.Lock()
	r := m.registerer
	m.registerer = nil
	m.mu.Unlock()
	if r == nil {
		return
	}
	for _, c := range m.all {
		r.Unregister(c)
	}
}

// queueTasksCollector collects hourglass_queue_tasks from an engine's
// count.
type queueTasksCollector func() []task.QueueStats

func (c queueTasksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- QueueTasksDesc }

func (c queueTasksCollector) Collect(ch chan<- prometheus.Metric) {
	for _, q := range c() {
		CollectQueueTasks(ch, QueueTasksDesc, q)
	}
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

// QueueTasksDesc describes hourglass_queue_tasks, the gauge of a queue's
// tasks by state that both engines serve.
var QueueTasksDesc = prometheus.NewDesc("hourglass_queue_tasks",
	"Tasks in a queue by state.", []string{"queue", "state"}, nil)

// CollectQueueTasks sends q's counts as hourglass_queue_tasks samples.
func CollectQueueTasks(ch chan<- prometheus.Metric, desc *prometheus.Desc, q task.QueueStats) {
	for _, s := range [...]struct {
		name string
		n    int
	}{{"delayed", q.Delayed}, {"ready", q.Ready}, {"reserved", q.Reserved}, {"dead", q.Dead}} {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(s.n), q.Name, s.name)
	}
}
