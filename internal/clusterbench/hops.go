package clusterbench

import (
	"fmt"
	"math"
	"runtime/metrics"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// hopMetrics are the nodes' per-hop histograms (cluster/metrics.go) that
// a due stream reports, with their short names; the delivered one is
// reported by path.
var hopMetrics = []struct{ metric, name string }{
	{"hourglass_cluster_hop_due_to_fired_seconds", "due→fired"},
	{"hourglass_cluster_hop_fired_to_flushing_seconds", "fired→flushing"},
	{"hourglass_cluster_flush_seconds", "flush"},
	{"hourglass_cluster_hop_due_to_flushed_seconds", "due→flushed"},
	{"hourglass_cluster_hop_flushed_to_notified_seconds", "flushed→notify"},
	{"hourglass_cluster_hop_notified_to_reserved_seconds", "notify→reserved"},
	{"hourglass_cluster_hop_due_to_delivered_seconds", "due→delivered"},
}

// Hop is one of the nodes' histograms over a due stream: how many
// observations it had and its p50, p99 and largest bucket's bound,
// estimated from the buckets summed over the nodes (as Prometheus's
// histogram_quantile does), and, per node, its p99.
type Hop struct {
	Name          string
	Count         uint64
	P50, P99, Top time.Duration
	NodeP99       []time.Duration
}

func (h Hop) String() string {
	per := make([]string, len(h.NodeP99))
	for i, d := range h.NodeP99 {
		per[i] = round(d).String()
	}
	return fmt.Sprintf("%s n=%d p50 %v p99 %v top bucket ≤%v (p99 by node %s)",
		h.Name, h.Count, round(h.P50), round(h.P99), round(h.Top), strings.Join(per, " "))
}

// round rounds d to 10 µs, for reading.
func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

// Process is what the bench's process (the nodes, the load and the
// reservers: one Go runtime) went through during a due stream: its GC
// cycles, its goroutines' stop-the-world pauses, and how long goroutines
// that were ready to run waited for a CPU (the runtime's
// /sched/latencies), p99 and worst bucket. A wait there delays a node's
// wheel, flusher or reserve and the bench's reservers alike.
type Process struct {
	GCCycles                      uint64
	PauseP99, PauseMax            time.Duration
	SchedP99, SchedP999, SchedMax time.Duration
}

func (p Process) String() string {
	return fmt.Sprintf("%d GC cycles, stop-the-world pauses p99 %v max ≤%v, goroutines waiting to run p99 %v p99.9 %v max ≤%v",
		p.GCCycles, round(p.PauseP99), round(p.PauseMax), round(p.SchedP99), round(p.SchedP999), round(p.SchedMax))
}

// snapshot is the nodes' histograms and the process's runtime metrics at
// one moment, to subtract (hops).
type snapshot struct {
	// nodes[i][name]: node i's buckets (cumulative counts by upper
	// bound) of each hop; the delivered one under "due→delivered <path>".
	nodes   []map[string][]bucket
	runtime []metrics.Sample
}

// bucket is a cumulative histogram bucket.
type bucket struct {
	le    float64
	count uint64
}

var runtimeNames = []string{"/gc/cycles/total:gc-cycles", "/sched/pauses/total/gc:seconds", "/sched/latencies:seconds"}

// snap reads every node's registry and the runtime's metrics. A registry
// that fails to gather counts as empty.
func (c *Cluster) snap() snapshot {
	var s snapshot
	for _, r := range c.regs {
		m := map[string][]bucket{}
		fams, _ := r.Gather()
		for _, f := range fams {
			for _, hm := range hopMetrics {
				if f.GetName() != hm.metric {
					continue
				}
				for _, mt := range f.GetMetric() {
					name := hm.name
					for _, l := range mt.GetLabel() {
						if l.GetName() == "path" {
							name += " " + l.GetValue()
						}
					}
					m[name] = buckets(mt.GetHistogram())
				}
			}
		}
		s.nodes = append(s.nodes, m)
	}
	s.runtime = make([]metrics.Sample, len(runtimeNames))
	for i, n := range runtimeNames {
		s.runtime[i].Name = n
	}
	metrics.Read(s.runtime)
	return s
}

// buckets returns h's cumulative buckets, +Inf last.
func buckets(h *dto.Histogram) []bucket {
	var out []bucket
	for _, b := range h.GetBucket() {
		out = append(out, bucket{b.GetUpperBound(), b.GetCumulativeCount()})
	}
	return append(out, bucket{math.Inf(1), h.GetSampleCount()})
}

// hops returns the hops observed between before and after, in the order
// of hopMetrics, the delivered one by path; and what the process went
// through.
func hops(before, after snapshot) ([]Hop, Process) {
	var names []string
	seen := map[string]bool{}
	for _, hm := range hopMetrics {
		for _, m := range after.nodes {
			for name := range m {
				if (name == hm.name || strings.HasPrefix(name, hm.name+" ")) && !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
	}
	var out []Hop
	for _, name := range names {
		var sum []bucket
		h := Hop{Name: name}
		for i, m := range after.nodes {
			d := diff(m[name], before.nodes[i][name])
			h.NodeP99 = append(h.NodeP99, seconds(quantile(d, 0.99)))
			if sum == nil {
				sum = d
			} else {
				for k := range min(len(sum), len(d)) {
					sum[k].count += d[k].count
				}
			}
		}
		if len(sum) == 0 || sum[len(sum)-1].count == 0 {
			continue
		}
		h.Count = sum[len(sum)-1].count
		h.P50, h.P99 = seconds(quantile(sum, 0.5)), seconds(quantile(sum, 0.99))
		for k, b := range sum {
			if b.count == h.Count {
				h.Top = seconds(b.le)
				if math.IsInf(b.le, 1) && k > 0 {
					h.Top = seconds(sum[k-1].le) // beyond the last bound
				}
				break
			}
		}
		out = append(out, h)
	}
	var p Process
	p.GCCycles = after.runtime[0].Value.Uint64() - before.runtime[0].Value.Uint64()
	pauses := runtimeDiff(after.runtime[1].Value.Float64Histogram(), before.runtime[1].Value.Float64Histogram())
	p.PauseP99, p.PauseMax = seconds(quantile(pauses, 0.99)), seconds(quantile(pauses, 1))
	sched := runtimeDiff(after.runtime[2].Value.Float64Histogram(), before.runtime[2].Value.Float64Histogram())
	p.SchedP99, p.SchedP999, p.SchedMax = seconds(quantile(sched, 0.99)), seconds(quantile(sched, 0.999)), seconds(quantile(sched, 1))
	return out, p
}

// diff returns a's counts less b's, bucket by bucket (b nil: a).
func diff(a, b []bucket) []bucket {
	out := make([]bucket, len(a))
	copy(out, a)
	for k := range min(len(a), len(b)) {
		out[k].count -= b[k].count
	}
	return out
}

// runtimeDiff returns the cumulative buckets of a runtime histogram's
// counts in a less those in b (the same bounds), each bucket bounded
// above by its upper bound.
func runtimeDiff(a, b *metrics.Float64Histogram) []bucket {
	var out []bucket
	var cum uint64
	for i, n := range a.Counts {
		if i < len(b.Counts) {
			n -= b.Counts[i]
		}
		cum += n
		out = append(out, bucket{a.Buckets[i+1], cum})
	}
	return out
}

// quantile estimates the q-quantile of cumulative buckets, interpolating
// linearly within the bucket that holds it; q = 1 gives the upper bound
// of the last bucket with an observation (its lower one if it is +Inf).
func quantile(bs []bucket, q float64) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return 0
	}
	total := float64(bs[len(bs)-1].count)
	rank := q * total
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if float64(b.count) >= rank && b.count > 0 {
			if math.IsInf(b.le, 1) {
				return lo
			}
			if q == 1 || float64(b.count) == below {
				return b.le
			}
			return lo + (b.le-lo)*(rank-below)/(float64(b.count)-below)
		}
		if !math.IsInf(b.le, -1) {
			lo = b.le
		}
		below = float64(b.count)
	}
	return lo
}

// seconds converts s seconds to a duration.
func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
