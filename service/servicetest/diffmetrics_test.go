package servicetest_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hourglass-go/hourglass/service"
)

// sharedMetrics are the names of the metrics both engines serve under the
// same name, help and buckets (service.TaskMetrics, ScheduleMetrics and
// hourglass_queue_tasks): those TestDifferential compares after each
// step. An engine's own (the broker's store, a node's partitions) are
// left out.
var sharedMetrics = func() map[string]bool {
	cs := append(service.NewTaskMetrics().Collectors(), service.NewScheduleMetrics().Collectors()...)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if m := re.FindStringSubmatch(service.QueueTasksDesc.String()); m != nil {
		names[m[1]] = true
	}
	return names
}()

// sample is one series of a shared metric: a counter's or a gauge's
// value, a histogram's count of observations.
type sample struct {
	value float64
	gauge bool
}

// gather returns the series of the shared metrics of regs, each summed
// over regs (a cluster's nodes: each counts what it served, and
// hourglass_queue_tasks counts the partitions it owns), by name and
// labels.
func gather(regs []*prometheus.Registry) (map[string]sample, error) {
	out := map[string]sample{}
	for _, r := range regs {
		fams, err := r.Gather()
		if err != nil {
			return nil, err
		}
		for _, f := range fams {
			if !sharedMetrics[f.GetName()] {
				continue
			}
			for _, m := range f.GetMetric() {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				k := f.GetName() + "{" + strings.Join(ls, ",") + "}"
				s := out[k]
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					s.value += m.GetCounter().GetValue()
				case dto.MetricType_GAUGE:
					s.value += m.GetGauge().GetValue()
					s.gauge = true
				case dto.MetricType_HISTOGRAM:
					s.value += float64(m.GetHistogram().GetSampleCount())
				}
				out[k] = s
			}
		}
	}
	return out, nil
}

// metricChange is what a step changed of the shared metrics, from before
// to after, as compared: each counter's and histogram's increase (an
// engine restarted counts from 0, so increases compare where totals
// would not), each gauge's value, those that are not 0. A series that
// went away (its queue gone: service.TaskMetrics.ForgetQueue) is left
// out, since when an engine forgets it differs.
func metricChange(before, after map[string]sample) string {
	var out []string
	for k, a := range after {
		v := a.value
		if !a.gauge {
			v -= before[k].value
		}
		if v != 0 {
			out = append(out, fmt.Sprintf("%s %g", k, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n    ")
}
