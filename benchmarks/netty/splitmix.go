package main

import "strconv"

// The delays both sides draw: SplitMix64 (Steele, Lea and Flood), which
// NettyBench.java implements line for line, so that Netty and hourglass
// schedule the same deadlines in the same order. The driver checks the
// two agree (the seed job) before it measures anything.

// The seeds and span every job shares with NettyBench.java.
const (
	seedFill   = 1 // the n pending timeouts
	seedPairs  = 2 // the delays of the scheduled and cancelled pairs
	seedBurst  = 3 // the burst's delays
	seedWarm   = 4 // the delays of the burst run before it (-burstwarmup)
	tenMinutes = uint64(600_000_000_000)
)

// splitMix64 is a SplitMix64 generator. It is not safe for concurrent
// use; next is O(1).
type splitMix64 struct{ state uint64 }

func (g *splitMix64) next() uint64 {
	g.state += 0x9e3779b97f4a7c15
	z := g.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// delay returns a delay in [0, span) nanoseconds, as Java's
// Long.remainderUnsigned(next(), span).
func (g *splitMix64) delay(span uint64) uint64 { return g.next() % span }

// seedSums is the seed job's result: for each seed, the sum of its first
// 1000 delays over 0-10 minutes, in microseconds.
func seedSums() map[string]float64 {
	out := map[string]float64{}
	for _, s := range []uint64{seedFill, seedPairs, seedBurst, seedWarm} {
		g := splitMix64{s}
		var sum int64
		for range 1000 {
			sum += int64(g.delay(tenMinutes) / 1000)
		}
		out["seed"+strconv.FormatUint(s, 10)] = float64(sum)
	}
	return out
}
