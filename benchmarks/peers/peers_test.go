package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/internal/bench"
)

// BenchmarkPair times one side's schedule+cancel pair, one call each,
// with n timeouts pending at delays over 0-10 minutes drawn beforehand:
// each side in a process of its own, as go test runs it, where the
// command (main.go) runs them side by side in turns. Under callgrind it
// counts each side's instructions a pair.
func BenchmarkPair(b *testing.B) {
	delays := make([]time.Duration, 1<<16)
	for i := range delays {
		delays[i] = rand.N(bench.OneCallWindow)
	}
	for _, n := range []int{10_000, 1_000_000} {
		for _, s := range append(bench.OneCallSides(), peers()...) {
			b.Run(fmt.Sprintf("%s/n=%d", s.Name, n), func(b *testing.B) {
				next := 0
				delay := func() time.Duration {
					next++
					return delays[next&(len(delays)-1)]
				}
				pair, stop, err := s.Start(n, delay)
				if err != nil {
					b.Fatal(err)
				}
				defer stop()
				runtime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					pair()
				}
			})
		}
	}
}
