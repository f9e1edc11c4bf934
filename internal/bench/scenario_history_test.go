package bench

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestHistoryScenario builds the hourglass binary and runs the history
// scenario on the embedded store in a tiny configuration: 500 tasks/s
// for 3 s, a retention of 1 s, a sample every 500 ms. The cluster's
// row, which starts PostgreSQL, is left to a named run.
func TestHistoryScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hourglass and runs its server")
	}
	if runtime.GOOS == "windows" {
		t.Skip("the scenario stops its server with SIGTERM")
	}
	useBuiltServer(t)
	saved, savedSeries := History, HistorySeries
	t.Cleanup(func() { History, HistorySeries = saved, savedSeries })
	History = HistoryOptions{Rate: 500, Retention: time.Second, For: 3 * time.Second, Sample: 500 * time.Millisecond, Engine: "embedded"}
	var series bytes.Buffer
	HistorySeries = &series

	c := tiny()
	c.Scenarios = []string{"history"}
	results, err := Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("series:%s", series.String())
	if len(results) != 1 {
		t.Fatalf("%d rows, want 1 (the embedded store's)", len(results))
	}
	r := results[0]
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	t.Logf("%v %s", r.Metrics, r.Note)
	if !strings.HasPrefix(r.Note, "flat:") && !strings.HasPrefix(r.Note, "grows:") {
		t.Errorf("note %q, want a verdict", r.Note)
	}
	for _, name := range []string{"put/s", "acked/s", "plateau", "end"} {
		if v, ok := r.Value(name); !ok || !(v > 0) {
			t.Errorf("%s = %v (present %v), want > 0", name, v, ok)
		}
	}
	if rows := strings.Count(series.String(), "\n| embedded |"); rows != 6 {
		t.Errorf("%d samples in the series, want 6", rows)
	}
}

// TestHistoryScenario_OptIn checks that a run that does not name the
// scenario runs nothing of it.
func TestHistoryScenario_OptIn(t *testing.T) {
	jobs, err := Plan(tiny())
	if err != nil {
		t.Fatal(err)
	}
	var ours []Job
	for _, j := range jobs {
		if j.Scenario == "history" {
			ours = append(ours, j)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d history jobs in a run of every scenario, want 1", len(ours))
	}
	if r := ours[0].Run(); r.Note != historyOptIn || len(r.Metrics) != 0 || r.Err != "" {
		t.Errorf("note %q, %d metrics, error %q; want %q", r.Note, len(r.Metrics), r.Err, historyOptIn)
	}
}

// TestHistoryVerdict checks the verdict on made-up series: one that
// levels off after the retention, one that keeps growing.
func TestHistoryVerdict(t *testing.T) {
	const mib = 1 << 20
	mk := func(size func(i int) int64) []historySample {
		var out []historySample
		for i := 1; i <= 20; i++ {
			out = append(out, historySample{at: time.Duration(i) * 30 * time.Second, put: int64(i) * 150000, acked: int64(i) * 150000, size: size(i), rss: 100 * mib})
		}
		return out
	}
	var flat, grows Result
	historyVerdict(&flat, mk(func(i int) int64 { return int64(min(i, 5))*20*mib + int64(i%2)*mib }), 2*time.Minute, 30*time.Second)
	historyVerdict(&grows, mk(func(i int) int64 { return int64(i) * 20 * mib }), 2*time.Minute, 30*time.Second)
	if !strings.HasPrefix(flat.Note, "flat:") {
		t.Errorf("levelled series: %q, want flat", flat.Note)
	}
	if v, _ := flat.Value("plateau at"); v != 150 {
		t.Errorf("plateau at %v s, want 150 (2m + 30s)", v)
	}
	if !strings.HasPrefix(grows.Note, "grows:") {
		t.Errorf("growing series: %q, want grows", grows.Note)
	}
	if v, _ := grows.Value("growth/min"); v < 39 || v > 41 {
		t.Errorf("growth %v MiB/min, want 40", v)
	}

	// A pace that doubles halfway: the size doubles with the tasks kept,
	// 250 bytes each all along.
	var paced []historySample
	var acked int64
	for i := 1; i <= 20; i++ {
		rate := int64(2000)
		if i > 10 {
			rate = 4000
		}
		acked += rate * 30
		x := historySample{at: time.Duration(i) * 30 * time.Second, put: acked, acked: acked, rss: 100 * mib}
		historyKept(&x, paced, 2*time.Minute)
		x.size = 250 * x.kept
		paced = append(paced, x)
	}
	var pacedR Result
	historyVerdict(&pacedR, paced, 2*time.Minute, 30*time.Second)
	if !strings.HasPrefix(pacedR.Note, "flat per task kept:") {
		t.Errorf("paced series: %q, want flat per task kept", pacedR.Note)
	}
	if v, _ := pacedR.Value("B/kept end"); v != 250 {
		t.Errorf("B/kept at the end %v, want 250", v)
	}
}
