package cluster

import (
	"context"
	"fmt"
	"github.com/hourglass-go/hourglass/internal/retry"
	"github.com/hourglass-go/hourglass/internal/schedrun"
	"time"
)

// Hooks stand in for a paused process or a wrong clock in tests.
type Hooks = hooks

// WithHooks returns o with test hooks h.
func WithHooks(o Options, h *Hooks) Options {
	o.hooks = h
	return o
}

// Skew makes the node believe the database's clock is d ahead of what it
// measures.
func (h *hooks) Skew(d time.Duration) { h.skew.Store(int64(d)) }

// Pause stops the node's lease loop and flusher, as SIGSTOP would stop
// the process (its wheel still fires into the flusher's list); Resume
// lets them go on.
func (h *hooks) Pause()  { h.paused.Store(true) }
func (h *hooks) Resume() { h.paused.Store(false) }

// EmptyFor makes an empty look of a queue stand for d (emptyFor).
func (h *hooks) EmptyFor(d time.Duration) { h.emptyFor.Store(int64(d)) }

// Handing makes the flush call f after committing tasks it reserved for
// waiting reservers and before handing them over.
func (h *hooks) Handing(f func()) { h.handing.Store(&f) }

// Flushing makes the flush call f after reading the epochs of the
// partitions it writes and before its statement.
func (h *hooks) Flushing(f func()) { h.flushing.Store(&f) }

// Rounding makes each lease round call f, with the round's context,
// after renewing the leases.
func (h *hooks) Rounding(f func(context.Context)) { h.rounding.Store(&f) }

// Beating makes each lease round call f right after its heartbeat and
// renewal statement returned, before anything else of the round.
func (h *hooks) Beating(f func()) { h.beating.Store(&f) }

// Instance returns the node's run, as its heartbeat row holds it.
func (n *Node) Instance() string { return n.instance }

// Tick runs one round of the lease loop now.
func (n *Node) Tick(ctx context.Context) error { return n.members.tick(ctx) }

// Crash stops the node's goroutines without releasing anything, as a
// killed process would leave it; the test then closes the node's pool.
func (n *Node) Crash() { n.stop() }

// Owned returns the partitions the node believes it holds.
func (n *Node) Owned() map[int]int64 {
	return n.members.snapshot()
}

// SchedulePartition returns the partition whose owner fires schedule name.
func (n *Node) SchedulePartition(name string) int { return n.schedulePartition(name) }

// ScheduleNext returns the occurrence of schedule name armed on this
// node, or the zero time.
func (n *Node) ScheduleNext(name string) time.Time { return n.runner.Next(name) }

// FlushLanes is how many flushes an owner runs at once (flush.go).
const FlushLanes = flushLanes

// FlushGap is flushGap (flush.go).
const FlushGap = flushGap

// SQLFlush is the owner's flush statement (flush.go), SQLFlushDue its
// common part (flushfast.go).
var SQLFlush, SQLFlushDue = sqlFlush, sqlFlushDue

// SQLReserve is the reservation statement (reserve.go).
const SQLReserve = sqlReserve

// SQLReserveLimited is the reservation statement of limited queues
// (limits.go).
const SQLReserveLimited = sqlReserveLimited

// SQLReserveFair is the reservation statement of queues that use keys
// (reserve.go).
var SQLReserveFair = sqlReserveFair

// Waiting returns how many reservers wait on queue having found nothing,
// those the flush may hand tasks to.
func (n *Node) Waiting(queue string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if q := n.queues[queue]; q != nil {
		return q.WaitList.Waiting()
	}
	return 0
}

// SQLAck is the ack statement (ops.go).
const SQLAck = sqlAck

// WaitedOn returns how many queues the node keeps waiting state for.
func (n *Node) WaitedOn() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queues)
}

// Listening returns how many channels the node listens to.
func (n *Node) Listening() int { return n.notifications.listening() }

// SQLRenew is the renewal of the leases held (renew.go).
const SQLRenew = sqlRenew

// PruneHistory runs the history's primitive of its pruner once: it
// deletes up to max rows older than age and returns how many.
func (n *Node) PruneHistory(ctx context.Context, age time.Duration, max int) (int, error) {
	return n.pruneWith(sqlPrune)(ctx, age, max)
}

// PruneKeys runs one prune of the turns of keys without tasks, with idle
// as keyIdle, and returns how many it deleted.
func (n *Node) PruneKeys(ctx context.Context, idle time.Duration) (int, error) {
	return n.pruneWith(sqlPruneKeys)(ctx, idle, retry.PruneBatch)
}

// SQLFindWindow and SQLFind are FindTasks's statements (SQLFind with
// every state's condition: "true").
const SQLFindWindow = sqlFindWindow

var SQLFind = fmt.Sprintf(sqlFind, listColumns, stateWhere[0])

// PartitionOf returns the partition of job.
func (n *Node) PartitionOf(job uint64) int { return n.partitionOf(job) }

// Occur runs the occurrence at of the schedule name, of the version
// stored, as the Runner of its partition's owner would (occur).
func (n *Node) Occur(ctx context.Context, name string, at time.Time) (skipped bool, err error) {
	rows, err := n.readSchedules(ctx, "WHERE s.name = $1", name)
	if err != nil || len(rows) != 1 {
		return false, fmt.Errorf("hourglass: schedule %s: %d rows, %v", name, len(rows), err)
	}
	r := rows[0]
	return n.occur(ctx, &schedrun.Schedule{Spec: r.spec, Version: r.created, Tag: n.schedulePartition(name)}, at)
}

// TimerArmed reports whether the node's wheel holds a timer for job.
func (n *Node) TimerArmed(job uint64) bool {
	_, ok := n.timers.wheel.Deadline(job)
	return ok
}
