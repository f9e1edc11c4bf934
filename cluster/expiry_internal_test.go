package cluster

import (
	"context"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/service"
	"github.com/hourglass-go/hourglass/task"
)

// TestFlush_ExpiryIsServices: what the flush writes for a lease that ran
// out in a queue without on_failure is service.Expired's verdict on it,
// for every policy such a queue can have: with attempts left, ready again
// at once at its due time kept (the statement sets no delay and leaves
// due alone); used up, dead in its queue (state 3, no move); either way
// one timeout more, no attempt given back, task.LeaseExpired ($7) as the
// last error and the attempt's error, and the outcome expired.
func TestFlush_ExpiryIsServices(t *testing.T) {
	for _, p := range []task.Policy{
		{},
		{MaxAttempts: 3, TTR: 5e9},
		{MaxAttempts: task.UnlimitedAttempts, Rate: &task.Rate{Limit: 10, Per: 1e9}},
		{PerKey: &task.PerKey{Rate: &task.Rate{Limit: 1, Per: 1e9}}},
	} {
		left, usedUp, ok := service.ExpiryByCounters(p)
		if !ok || left != flushLeft || usedUp != flushUsedUp {
			t.Fatalf("policy %+v: ExpiryByCounters = %+v, %+v, %v; want the flush's %+v, %+v", p, left, usedUp, ok, flushLeft, flushUsedUp)
		}
	}
	for name, v := range map[string]service.Verdict{"left": flushLeft, "used up": flushUsedUp} {
		if v.Delay != 0 || v.Priority != nil || v.Attempts != 0 || v.Releases != 0 || v.Buries != 0 || v.Timeouts != 1 ||
			v.Attempt != task.AttemptExpired || v.AttemptError != task.LeaseExpired || v.Status != 0 ||
			v.LastError == nil || *v.LastError != task.LeaseExpired || v.DeadLetter != "" || !v.Expired || !v.Failed {
			t.Errorf("%s: verdict %+v is not what the flush writes", name, v)
		}
	}
	if flushLeft.Dead || !flushLeft.KeepDue || !flushUsedUp.Dead {
		t.Errorf("verdicts: left %+v, used up %+v; the flush keeps the due time of the one, and the other dies", flushLeft, flushUsedUp)
	}
}

// TestFlush_UsedUpIsServices: the flush's sqlDies, evaluated by
// PostgreSQL over a grid of a row's state and counters, dies exactly
// where service.Expired's verdict is dead for a reserved task (and never
// for one not reserved).
func TestFlush_UsedUpIsServices(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, pgtest.Start(t).CreateDatabase(t), 1, ConfigurePool)
	counts := []int64{0, 1, 2, 3, 24, 25, 26, task.MaxAttemptsLimit - 1, task.MaxAttemptsLimit, task.MaxAttemptsLimit + 1}
	var states, attempts, maxes []int64
	for _, st := range []int64{1, 2, 3} {
		for _, a := range counts {
			for _, m := range counts {
				states, attempts, maxes = append(states, st), append(attempts, a), append(maxes, m)
			}
		}
	}
	rows, err := pool.Query(ctx, `SELECT `+sqlDies+` FROM unnest($1::smallint[], $2::bigint[], $3::bigint[])
		WITH ORDINALITY AS t(state, attempts, max_attempts, i) ORDER BY i`, states, attempts, maxes)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i, wrong := 0, 0
	for ; rows.Next(); i++ {
		var dies bool
		if err := rows.Scan(&dies); err != nil {
			t.Fatal(err)
		}
		h := service.Held{Attempts: int(attempts[i]), MaxAttempts: int(maxes[i])}
		want := states[i] == 2 && service.Expired(h, 0).Dead
		if dies != want {
			if wrong++; wrong <= 5 {
				t.Errorf("state %d, attempts %d of %d: sqlDies %v, service.Expired dead %v", states[i], attempts[i], maxes[i], dies, want)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(states) || wrong > 0 {
		t.Fatalf("%d rows of %d, %d disagree", i, len(states), wrong)
	}
}
