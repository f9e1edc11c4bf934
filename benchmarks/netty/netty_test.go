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
	for _, name := range []string{"burst-inline", "burst-arm-default"} {
		r, err := goJobs[name](childConfig{n: 5000, spread: 50e6, timeout: 30e9})
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
