package cluster

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/task"
)

// Planning a lane ahead of its first flush.
//
// A lane's connection is warmed when it opens (timers.warm), but its
// generic plan of the flush statement is thrown away there: built over
// the tables as they are at a node's start, perhaps empty, it would read
// whole tables once they fill. The plan was then built by the lane's
// first flush, on the path of the tasks it delivers, so that the first
// tasks due on each lane of a node just started, or on a connection
// opened again (a cut, the pool's MaxConnLifetime), came that much late
// (docs/results/2026-12-08-6e10da9-cluster-plan-ahead.md).
//
// Now a lane whose connection has run no flush statement yet (cold)
// is planned a moment ahead (planLead) of the first timer armed while it
// is cold, by a run of the flush statements with nothing to flush, as
// the warm-up's, whose plan is kept: the plan is built over the tables
// as they are then, within planLead of what the first flush would have
// seen. The rule, in the flusher's loop (flushLoop), for each idle lane
// found cold after it connects (wantPlan):
//
//   - timers armed already (the connection opened again while the node
//     runs): plan it now;
//   - none: armAt sets the plan timer (planKey in the wheel) planLead
//     before the next timer it arms, or at once if that one is due
//     sooner; when it fires, the flusher plans every idle lane still
//     cold (planDue).
//
// A lane planned, or whose planning failed, is not cold any more until
// its connection opens again: planning is tried once a connection, and
// a lane whose planning failed plans at its first flush, as before. A
// timer due while its lanes plan waits for one, as it would for the plan
// in its flush.
//
// For example, a node starts on empty tables; a million tasks are put a
// day ahead, then one due in a second: armAt arms its timer and the plan
// timer 900 ms from now; at 900 ms both lanes run the statements with
// nothing to flush, over the table of a million rows; at one second the
// task's flush runs on a planned lane, in about a millisecond.

// planLead is how long before the first timer armed on cold lanes they
// are planned: more than a plan's few milliseconds on a loaded machine,
// little enough that the tables do not change much meanwhile.
const planLead = 100 * time.Millisecond

// planKey is the key of the plan timer in the wheel, which holds jobs by
// id otherwise: job ids are positive int64s, never this.
const planKey = math.MaxUint64

// wantPlan is called by the flusher's loop when an idle lane's
// connection is cold: it reports whether to plan it now (timers are
// armed already), or else has the next timer armed set the plan timer
// (armPlanLocked). O(1).
func (t *timers) wantPlan() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.planArmed || t.planWanted {
		return false
	}
	if len(t.fired) > 0 || t.wheel.Len() > 0 {
		return true
	}
	t.planWanted = true
	return false
}

// armPlanLocked sets the plan timer planLead before a timer armed d from
// now, if a cold lane asked for it (wantPlan). t.mu is held.
func (t *timers) armPlanLocked(d time.Duration) {
	if !t.planWanted {
		return
	}
	t.planWanted, t.planArmed = false, true
	t.wheel.Set(planKey, max(d-planLead, 0))
}

// planFired is fire for the plan timer: it tells the flusher's loop to
// plan its cold lanes.
func (t *timers) planFired() {
	t.mu.Lock()
	t.planArmed = false
	t.mu.Unlock()
	select {
	case t.planDue <- struct{}{}:
	default:
	}
}

// plan runs the flush statements with nothing to flush on own's
// connection, which builds and keeps their generic plans there (see
// warm, whose runs these are, without the drop). A failure is the next
// flush's to meet: it plans then, as before. Bounded by the pool's
// deadline, and cut short by stop. Called only while no flush runs on
// own.
func (t *timers) plan(own *ownConn) {
	conn, err := own.open(t.done)
	if err != nil {
		return
	}
	own.planned = true // tried once a connection
	ctx, cancel := own.p.bound(t.done)
	defer cancel()
	if err := t.runEmpty(ctx, conn); err != nil {
		own.failed(err)
		t.log.Debug("hourglass: planning the flush statements ahead failed; the first flush plans them", "err", err)
	}
}

// runEmpty runs each flush statement once on conn with nothing to flush
// (emptyFlushes), which builds its generic plan there if conn has none.
func (t *timers) runEmpty(ctx context.Context, conn *pgx.Conn) error {
	for _, st := range t.emptyFlushes() {
		if err := st.run(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// run runs st on conn and reads its rows to the end.
func (st emptyFlush) run(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, st.sql, st.args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// emptyFlush is a flush statement with arguments that flush nothing: it
// fences no partition, so it locks, reads and writes no row.
type emptyFlush struct {
	sql  string
	args []any
}

// emptyFlushes returns the flush statements, sqlFlushDue and sqlFlush,
// each with arguments that flush nothing.
func (t *timers) emptyFlushes() []emptyFlush {
	none := []any{t.name, []int32{}, []int64{}, []int64{}, []string{}, []int32{}}
	return []emptyFlush{
		{sqlFlushDue, append(none[:len(none):len(none)], newLeaseToken())},
		{sqlFlush, append(none[:len(none):len(none)], task.LeaseExpired, t.keep, newLeaseToken())},
	}
}
