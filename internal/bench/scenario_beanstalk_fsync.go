package bench

import (
	"os"
	"slices"
	"time"
)

// fsyncBlock is what each step of the fsync probe appends before its
// fdatasync: about what one group commit of the puts ×64 case writes to
// Pebble's WAL (some 20 jobs of 200 bytes).
const fsyncBlock = 4 << 10

// fsyncProbe is the disk's side of the beanstalk scenario: for d, it
// appends fsyncBlock bytes to a new file in dir and syncs it with
// fdatasync, one step after the other, as a write-ahead log does. It
// returns the syncs per second and the latencies' median and 99th
// percentile. An fsync before every reply bounds a closed-loop client of
// c connections to c / latency replies a second, and only if every sync
// covers a write of every connection.
func fsyncProbe(dir string, d time.Duration) (rate float64, p50, p99 time.Duration, err error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, fsyncBlock)
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d || len(lat) == 0 {
		t := time.Now()
		if _, err := f.Write(block); err != nil {
			return 0, 0, 0, err
		}
		if err := syncData(f); err != nil {
			return 0, 0, 0, err
		}
		lat = append(lat, time.Since(t))
	}
	rate = float64(len(lat)) / time.Since(start).Seconds()
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return rate, q(0.50), q(0.99), nil
}
