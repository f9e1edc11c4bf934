package service_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestTaskMetrics_Events: what each event counts, written once for both
// engines.
func TestTaskMetrics_Events(t *testing.T) {
	m := service.NewTaskMetrics()
	m.Put(3)
	m.Delivered(2*time.Second, time.Second)
	m.Acked(2)
	m.Nacked()
	m.Expired(4)
	m.Failed("q", 2, false, false)    // back again
	m.Failed("q", 1, true, false)     // dead in q
	m.Failed("q", 1, true, true)      // moved to q's dead-letter queue
	m.Failed("idle", 0, false, false) // nothing: no series
	m.HeldBack("q", service.ThrottledRate)
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"puts", m.Puts, 3},
		{"deliveries", m.Deliveries, 1},
		{"acks", m.Acks, 2},
		{"nacks", m.Nacks, 1},
		{"expiries", m.LeaseExpiries, 4},
		{"dead", m.Dead, 2},
		{"retries of q", m.Retries.WithLabelValues("q"), 2},
		{"dead-lettered from q", m.DeadLettered.WithLabelValues("q"), 1},
		{"throttled", m.Throttled.WithLabelValues("q", service.ThrottledRate), 1},
	} {
		if got := value(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if got := count(m.Lateness); got != 1 {
		t.Errorf("lateness: %d series", got)
	}
	sm := service.NewScheduleMetrics()
	sm.Occurred("s")
	sm.Skips("s")
	sm.Misses("s", 3)
	for c, want := range map[prometheus.Collector]float64{sm.Put.WithLabelValues("s"): 1, sm.Skipped.WithLabelValues("s"): 1, sm.Missed.WithLabelValues("s"): 3} {
		if got := value(c); got != want {
			t.Errorf("schedule metric %v, want %v", got, want)
		}
	}
	if got := count(m.Retries); got != 1 {
		t.Errorf("retries: %d series, want q's only (no event of idle's)", got)
	}
}

// TestMetrics_Register: an engine's metrics register with its own
// collectors, serve hourglass_queue_tasks from the engine's count, and
// come off the registry, all of them, on Unregister (again: nothing).
func TestMetrics_Register(t *testing.T) {
	own := prometheus.NewCounter(prometheus.CounterOpts{Name: "hourglass_test_own_total", Help: "An engine's own."})
	m := service.NewMetrics(func() []task.QueueStats {
		return []task.QueueStats{{Name: "q", Ready: 2, Dead: 1}}
	}, own)
	r := prometheus.NewPedanticRegistry()
	if err := m.Register(r); err != nil {
		t.Fatal(err)
	}
	m.Put(1)
	m.Schedules.Put.WithLabelValues("s").Inc()
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, n := range []string{"hourglass_tasks_put_total", "hourglass_queue_tasks", "hourglass_test_own_total", "hourglass_schedule_occurrences_put_total"} {
		if !names[n] {
			t.Errorf("%s not served: %v", n, names)
		}
	}
	if got := value(m.Puts); got != 1 {
		t.Errorf("puts %v", got)
	}
	m.Unregister()
	m.Unregister()
	if err := r.Register(own); err != nil {
		t.Errorf("own collector still registered after Unregister: %v", err)
	}
}

// collect returns the samples c collects.
func collect(c prometheus.Collector) []*dto.Metric {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var out []*dto.Metric
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err == nil {
			out = append(out, &d)
		}
	}
	return out
}

// count returns how many series c has.
func count(c prometheus.Collector) int { return len(collect(c)) }

// value returns the value of c's one counter.
func value(c prometheus.Collector) float64 {
	ms := collect(c)
	if len(ms) != 1 {
		return -1
	}
	return ms[0].GetCounter().GetValue()
}
