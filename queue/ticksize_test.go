package queue

import (
	"math"
	"math/rand/v2"
	"testing"
)

// checkTickSize compares tickSize's division of x by n with the DIV
// instruction's.
func checkTickSize(t *testing.T, n, x uint64) {
	t.Helper()
	ts := newTickSize(n)
	q, r := ts.div(x)
	if q != x/n || r != x%n {
		t.Fatalf("%d / %d: got %d rem %d, want %d rem %d", x, n, q, r, x/n, x%n)
	}
	if c, want := ts.ceil(x), ceilTicks(x, n); c != want {
		t.Fatalf("ceil(%d / %d) = %d, want %d", x, n, c, want)
	}
}

// TestTickSize_Div checks the reciprocal division against DIV at the
// edges (0, multiples of n and their neighbours, the top of the range)
// and at random, for ticks from 1 ns to the largest.
func TestTickSize_Div(t *testing.T) {
	ticks := []uint64{1, 2, 3, 7, 1000, 1_000_000, 999_999_937, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}
	for range 200 {
		ticks = append(ticks, rand.Uint64N(1<<uint(rand.IntN(64)))+1)
	}
	for _, n := range ticks {
		xs := []uint64{0, 1, n - 1, n, n + 1, math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 - n, math.MaxUint64 / n * n, math.MaxUint64/n*n - 1}
		for range 2000 {
			xs = append(xs, rand.Uint64(), rand.Uint64()>>uint(rand.IntN(64)))
		}
		for _, x := range xs {
			checkTickSize(t, n, x)
		}
	}
}

func FuzzTickSize(f *testing.F) {
	f.Add(uint64(1_000_000), uint64(3_600_000_000_123))
	f.Add(uint64(3), uint64(6))
	f.Add(uint64(math.MaxUint64), uint64(math.MaxUint64-1))
	f.Fuzz(func(t *testing.T, n, x uint64) {
		if n == 0 {
			return
		}
		checkTickSize(t, n, x)
	})
}
