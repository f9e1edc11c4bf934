package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors checks that every bad invocation fails with status 2
// before running anything, naming the bad value on stderr after the
// "hourglass:" prefix and following it with the usage line.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--fast"}, "-fast"},
		{"bad max", []string{"--max", "lots"}, `"lots"`},
		{"fractional max", []string{"--max", "1.5"}, `"1.5"`},
		{"zero max", []string{"--max", "0"}, `"0"`},
		{"huge max", []string{"--max", "1e12"}, `"1e12"`},
		{"zero runs", []string{"--runs", "0"}, `"0"`},
		{"bad runs", []string{"--runs", "five"}, `"five"`},
		{"unknown scenario", []string{"--scenario", "memory,warp"}, `"warp"`},
		{"unknown structure", []string{"--structures", "heap,btree"}, `"btree"`},
		{"bad chart name", []string{"--chart", "out.jpg"}, `"out.jpg"`},
		{"stray argument", []string{"extra"}, `"extra"`},
		{"bad bool", []string{"--quick=maybe"}, "maybe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			msg := stderr.String()
			if !strings.HasPrefix(msg, "hourglass: ") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, usage) {
				t.Errorf("stderr = %q, want hourglass: ... %s ... and the usage line", msg, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Errorf("%v: exit status %d, want 0", args, code)
		}
		if !strings.Contains(stdout.String(), usage) {
			t.Errorf("%v: stdout = %q, want the usage line", args, stdout.String())
		}
	}
}

func TestParseBench(t *testing.T) {
	o, _, err := parseBench([]string{"--quick", "--json", "--max", "1e7", "--scenario", "memory, gc", "--structures", "heap", "--chart", "x.png"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.quick || !o.json || o.max != 10_000_000 || o.chart != "x.png" ||
		strings.Join(o.scenarios, ",") != "memory,gc" || strings.Join(o.structures, ",") != "heap" {
		t.Errorf("parsed %+v", o)
	}
	c := o.config()
	if got := c.Sizes[len(c.Sizes)-1]; got != 10_000_000 {
		t.Errorf("largest size %d, want 1e7", got)
	}
	o, _, err = parseBench([]string{"--max", "10000000"})
	if err != nil || o.max != 10_000_000 {
		t.Errorf("--max 10000000: %d, %v", o.max, err)
	}
	o, _, _ = parseBench([]string{"--quick"})
	if c := o.config(); c.Sizes[len(c.Sizes)-1] != 100_000 {
		t.Errorf("--quick sizes %v, want up to 1e5", c.Sizes)
	}
}

// TestRunSmall runs two cheap scenarios end to end at the smallest size:
// Markdown on stdout, progress on stderr, the chart on disk; then JSON.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real measurements")
	}
	chart := filepath.Join(t.TempDir(), "c.png")
	args := []string{"--quick", "--max", "1000", "--runs", "2", "--scenario", "schedule-cancel,memory", "--structures", "heap,runtime", "--chart", chart}
	var stdout, stderr strings.Builder
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"medians of 2 runs", "### schedule-cancel", "### memory", "| heap | 1,000 |", "| runtime | 1,000 |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "8/8 done") {
		t.Errorf("stderr lacks the finished progress bar:\n%s", stderr.String())
	}
	if fi, err := os.Stat(chart); err != nil || fi.Size() == 0 {
		t.Errorf("chart: %v", err)
	}

	stdout.Reset()
	args = []string{"--json", "--max", "1000", "--scenario", "memory", "--structures", "heap", "--chart", ""}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("--json: exit status %d", code)
	}
	var out struct {
		Results []struct {
			Scenario, Structure string
			N                   int
		}
	}
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if len(out.Results) != 1 || out.Results[0].Scenario != "memory" || out.Results[0].N != 1000 {
		t.Errorf("--json results %+v", out.Results)
	}
}
