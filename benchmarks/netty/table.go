package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
)

// row is one line of the table: a metric of Netty's job beside the same
// metric of a Go job.
type row struct {
	what   string // the measure, with the hourglass side's variant
	netty  string // Netty's job
	goJob  string // the Go job
	metric string
	format string // of the values
}

// rows are the table's lines, in order.
var rows = []row{
	{"schedule+cancel pair among n pending, caller's wall ns: `AfterFunc`+`Cancel`", "pair", "pair-afterfunc", "wall_ns", "%.1f"},
	{"the same: `Arm`+`Timer.Cancel`", "pair", "pair-arm", "wall_ns", "%.1f"},
	{"pair, process CPU ns (all threads, GC included): `AfterFunc`", "pair", "pair-afterfunc", "cpu_ns", "%.1f"},
	{"the same: `Arm`", "pair", "pair-arm", "cpu_ns", "%.1f"},
	{"pair loop, GC ms a second (Go: GC CPU; Java: collectors' time): `AfterFunc`", "pair", "pair-afterfunc", "gc_ms_per_s", "%.1f"},
	{"the same: `Arm`", "pair", "pair-arm", "gc_ms_per_s", "%.1f"},
	{"heap per pending timeout, handles kept, B: `AfterFunc`", "heap", "heap-afterfunc", "bytes", "%.1f"},
	{"the same: `Arm`", "heap", "heap-arm", "bytes", "%.1f"},
	{"burst: scheduling ns a timeout during it: `AfterFunc`, Inline", "burst", "burst-inline", "schedule_ns", "%.0f"},
	{"the same: `Arm`, Inline", "burst", "burst-arm-inline", "schedule_ns", "%.0f"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "schedule_ns", "%.0f"},
	{"the same: `Arm`, default executor", "burst", "burst-arm-default", "schedule_ns", "%.0f"},
	{"burst: the scheduling thread's CPU ns a timeout (Go: its goroutine locked to it): `AfterFunc`, Inline", "burst", "burst-inline-locked", "caller_cpu_ns", "%.0f"},
	{"the same: `Arm`, Inline", "burst", "burst-arm-inline-locked", "caller_cpu_ns", "%.0f"},
	{"burst: process CPU ns a timeout while scheduling (all threads): `AfterFunc`, Inline", "burst", "burst-inline", "schedule_cpu_ns", "%.0f"},
	{"the same: `Arm`, Inline", "burst", "burst-arm-inline", "schedule_cpu_ns", "%.0f"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "schedule_cpu_ns", "%.0f"},
	{"burst: process CPU ns a timeout, first call to last fire: `AfterFunc`, Inline", "burst", "burst-inline", "cpu_ns", "%.0f"},
	{"the same: `Arm`, Inline", "burst", "burst-arm-inline", "cpu_ns", "%.0f"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "cpu_ns", "%.0f"},
	{"burst: fires/s (higher is better): `AfterFunc`, Inline", "burst", "burst-inline", "fires_per_s", "rate"},
	{"the same: `Arm`, Inline", "burst", "burst-arm-inline", "fires_per_s", "rate"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "fires_per_s", "rate"},
	{"the same: `Arm`, default executor", "burst", "burst-arm-default", "fires_per_s", "rate"},
	{"burst: lateness p50 ms: `AfterFunc`, Inline", "burst", "burst-inline", "late_p50_ms", "%.2f"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "late_p50_ms", "%.2f"},
	{"burst: lateness p99 ms: `AfterFunc`, Inline", "burst", "burst-inline", "late_p99_ms", "%.2f"},
	{"the same: `Arm`, Inline", "burst", "burst-arm-inline", "late_p99_ms", "%.2f"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "late_p99_ms", "%.2f"},
	{"burst: lateness max ms: `AfterFunc`, Inline", "burst", "burst-inline", "late_max_ms", "%.2f"},
	{"the same: `AfterFunc`, default executor", "burst", "burst-default", "late_max_ms", "%.2f"},
	{"burst: GC ms from the first call to the last fire (Go: GC CPU; Java: collectors' time): `Arm`, Inline", "burst", "burst-arm-inline", "gc_ms", "%.1f"},
	{"burst decomposed: the scheduling loop, ms: `Arm`, Inline", "burst", "burst-arm-inline", "loop_ms", "%.0f"},
	{"the same: `AfterFunc`, Inline", "burst", "burst-inline", "loop_ms", "%.0f"},
	{"burst decomposed: the last deadline, ms after the first call: `Arm`, Inline", "burst", "burst-arm-inline", "last_due_ms", "%.0f"},
	{"burst decomposed: the last fire, ms after the first call (fires/s's denominator): `Arm`, Inline", "burst", "burst-arm-inline", "end_ms", "%.0f"},
	{"the same: `AfterFunc`, Inline", "burst", "burst-inline", "end_ms", "%.0f"},
	{"burst decomposed: timeouts due and not yet fired as the loop ends: `Arm`, Inline", "burst", "burst-arm-inline", "behind_at_loop_end", "%.0f"},
	{"burst decomposed: most timeouts due and not yet fired at once: `Arm`, Inline", "burst", "burst-arm-inline", "behind_max", "%.0f"},
	{"idle 1 timeout 1 h away: process CPU ms over the window", "idle", "idle", "cpu_ms", "%.2f"},
	{"idle: context switches of all threads (wake-ups)", "idle", "idle", "wakeups", "%.0f"},
}

// median returns the median of job key's metric over the rounds, and
// false if no round has it.
func median(res results, key, metric string) (float64, bool) {
	var vs []float64
	for _, m := range res[key] {
		if v, ok := m[metric]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, true
}

// writeTable writes the Markdown table of medians and ratios, and the
// bursts' correctness counts.
func writeTable(w io.Writer, d *driver, res results, rounds int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Netty 4.1 HashedWheelTimer (1 ms tick, 512 slots; %s; JVM %s) against hourglass New() (%s, GOMAXPROCS %d): n = %d pending, a burst of %d due within %v, idle window %v; medians of %d round(s) in turns; ratio = hourglass / Netty.\n\n",
		d.javaV, strings.Join(d.jvm, " "), runtime.Version(), runtime.GOMAXPROCS(0), d.c.n, d.burstN, d.c.spread, d.idle, rounds)
	if d.base != "" {
		fmt.Fprintf(&b, "The base column is another build, %s, its Go jobs each run right after this build's.\n\n", d.base)
		b.WriteString("| row | Netty 1 ms | base | ratio | hourglass | ratio |\n|---|---:|---:|---:|---:|---:|\n")
	} else {
		b.WriteString("| row | Netty 1 ms | hourglass | ratio |\n|---|---:|---:|---:|\n")
	}
	for _, r := range rows {
		nv, nok := median(res, "netty:"+r.netty, r.metric)
		gv, gok := median(res, "go:"+r.goJob, r.metric)
		cell := func(v float64, ok bool) string {
			if !ok {
				return "-"
			}
			if r.format == "rate" {
				return rate(v)
			}
			return fmt.Sprintf(r.format, v)
		}
		ratio := func(v float64, ok bool) string {
			if !nok || !ok || nv == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f×", v/nv)
		}
		if d.base != "" {
			bv, bok := median(res, "base:"+r.goJob, r.metric)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.what, cell(nv, nok), cell(bv, bok), ratio(bv, bok), cell(gv, gok), ratio(gv, gok))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.what, cell(nv, nok), cell(gv, gok), ratio(gv, gok))
	}
	b.WriteString("\nBursts, early / lost / fired twice, summed over the rounds:")
	keys := []string{"netty:burst", "go:burst-inline", "go:burst-arm-inline", "go:burst-inline-locked", "go:burst-arm-inline-locked", "go:burst-default", "go:burst-arm-default"}
	if d.base != "" {
		for _, k := range keys[1:] {
			keys = append(keys, "base:"+strings.TrimPrefix(k, "go:"))
		}
	}
	for _, k := range keys {
		var e, l, t float64
		for _, m := range res[k] {
			e, l, t = e+m["early"], l+m["lost"], t+m["double"]
		}
		fmt.Fprintf(&b, " %s %g/%g/%g;", strings.TrimPrefix(k, "go:"), e, l, t)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// rate formats a rate per second with a k or M suffix.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
