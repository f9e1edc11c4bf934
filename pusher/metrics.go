package pusher

import "github.com/prometheus/client_golang/prometheus"

// metrics are a Pusher's: pushes by outcome ("acked", "retry_after",
// "failed", "released", "cancelled" (its task cancelled or deleted
// while pushed), and "lost" for a push whose task could not be
// settled, its lease gone), and how long pushes take.
type metrics struct {
	pushes  *prometheus.CounterVec
	seconds prometheus.Histogram
}

// newMetrics returns the metrics, registered with reg when it is not nil.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hourglass_pushes_total",
			Help: "Pushes of push queues' tasks by outcome: acked, retry_after, failed, released (at a shutdown), cancelled (the task cancelled or deleted during the push), lost (the lease gone before it was settled).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hourglass_push_duration_seconds",
			Help:    "Time from a push's request to its answer (or its failure).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms to 33 s
		}),
	}
	if reg != nil {
		reg.MustRegister(m.pushes, m.seconds)
	}
	return m
}
