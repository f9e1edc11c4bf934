package hourglass

import "time"

// Internal hooks for the tests in package hourglass_test.

// DriverWakeups reports how many passes t's driver goroutines have made
// over their structures, summed over the shards (see [Stats.Wakeups]).
func DriverWakeups(t *Timer) uint64 { return t.Stats().Wakeups }

// StartedDrivers reports how many of t's shards have started their driver
// goroutine.
func StartedDrivers(t *Timer) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if sh.started {
			n++
		}
		sh.mu.Unlock()
	}
	return n
}

// AfterFuncOnShard schedules f to run d from now on shard i, where
// [Timer.AfterFunc] would use the shard of the caller's P, so that tests
// can spread timeouts over several shards whatever P they run on.
func AfterFuncOnShard(t *Timer, i int, d time.Duration, f func()) (*Timeout, error) {
	return t.scheduleOn(&t.shards[i], t.deadline(d), d <= 0, f, nil)
}

// TimeOfReading returns the instant of reading r of t's clock: r
// nanoseconds after New.
func TimeOfReading(t *Timer, r uint64) time.Time { return t.timeOf(r) }

// BatchOnShard runs fn with a Batch that holds shard i, where
// [Timer.Batch] would schedule on the shard of the caller's P, so that
// tests can spread value timeouts over several shards.
func BatchOnShard(t *Timer, i int, fn func(b *Batch)) {
	t.Batch(func(b *Batch) {
		b.lock(&t.shards[i])
		fn(b)
	})
}

// HandleShard reports the shard h's timeout is on.
func HandleShard(h Handle) int { return int(h.shard) }
