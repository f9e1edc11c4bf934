package hourglass

// Stats is a snapshot of a [Timer], for monitoring and benchmarks.
type Stats struct {
	// Structure names the deadline structure and its parameters, such as
	// "hierarchical wheel (tick 1ms)".
	Structure string
	// Shards is the number of shards (see [WithShards]).
	Shards int
	// Drivers is the number of driver goroutines started and not yet
	// stopped.
	Drivers int
	// Pending is what [Timer.Pending] reports.
	Pending int
	// Wakeups counts the drivers' passes over their structures since New:
	// each time a driver woke, because a deadline came, because a timeout
	// was scheduled before the one it slept for, or to go on after handing
	// over a batch. With nothing pending it does not grow.
	Wakeups uint64
}

// Stats returns a snapshot of t. It takes each shard's lock in turn, so
// the figures of different shards are not from one instant.
func (t *Timer) Stats() Stats {
	t.mustBeMade("Stats")
	s := Stats{Structure: t.structure, Shards: len(t.shards)}
	stopped := t.stopped.Load()
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if sh.driving() {
			s.Drivers++
		}
		if !stopped {
			s.Pending += sh.pending()
		}
		s.Wakeups += sh.wakeups
		sh.mu.Unlock()
	}
	return s
}
