package main

import (
	"os"
	"strconv"
	"testing"
)

// TestSplitMix64 checks the generator against SplitMix64's published
// outputs for seed 1234567, the sequence NettyBench.java must draw too
// (the driver's seed job compares the two sides).
func TestSplitMix64(t *testing.T) {
	g := splitMix64{1234567}
	for i, want := range []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821} {
		if got := g.next(); got != want {
			t.Fatalf("output %d = %d, want %d", i, got, want)
		}
	}
}

// TestProcCounters reads this process's counters as the idle row reads
// a child's.
func TestProcCounters(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	if _, err := procCPU(pid); err != nil {
		t.Fatal(err)
	}
	n, err := procSwitches(pid)
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatalf("%d context switches", n)
	}
}

// TestBurstCounts runs a small burst of the Go side and checks that
// nothing fired early, was lost or fired twice.
func TestBurstCounts(t *testing.T) {
	for _, name := range []string{"burst-inline", "burst-arm-inline-locked", "burst-arm-default"} {
		r, err := goJobs[name](childConfig{n: 5000, spread: 50e6, timeout: 30e9, burstWarm: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, what := range []string{"early", "lost", "double"} {
			if r[what] != 0 {
				t.Errorf("%s: %s = %v", name, what, r[what])
			}
		}
	}
}

// TestIncorrect checks that a burst's early, lost or doubled fire, on
// either side, is what makes the command fail, and timings are not.
func TestIncorrect(t *testing.T) {
	ok := results{
		"netty:burst":     {{"early": 0, "lost": 0, "double": 0, "late_p99_ms": 900}},
		"go:burst-inline": {{"early": 0, "lost": 0, "double": 0, "late_p99_ms": 5000}},
	}
	if bad := incorrect(ok); len(bad) != 0 {
		t.Errorf("incorrect(%v) = %v; want none", ok, bad)
	}
	for _, what := range []string{"early", "lost", "double"} {
		for _, side := range []string{"netty:burst", "go:burst-inline"} {
			r := results{side: {{"early": 0, "lost": 0, "double": 0}, {what: 1}}}
			if bad := incorrect(r); len(bad) != 1 {
				t.Errorf("%s %s: incorrect = %v; want one", side, what, bad)
			}
		}
	}
}

// TestDecompose checks the burst's decomposition on a burst small enough
// to count by hand: deadlines 10, 20, 30 and 40 ns after the first call,
// fired 5, 0, 20 and 1 ns late, the loop ending at 25.
func TestDecompose(t *testing.T) {
	got := decompose([]int64{40, 10, 30, 20}, []int64{1, 5, 20, 0}, 25)
	want := map[string]float64{
		"loop_ms":            25e-6,
		"last_due_ms":        40e-6,
		"end_ms":             50e-6, // the one due at 30, fired 20 late
		"behind_at_loop_end": 0,     // due by 25: 10 and 20, fired at 15 and 20
		"behind_max":         2,     // at 40: 30 and 40 due, neither fired
	}
	for k, w := range want {
		if g := got[k]; g != w {
			t.Errorf("%s = %v, want %v", k, g, w)
		}
	}
}
