package cluster

import (
	"context"
	"testing"
	"time"
)

// TestVacuum_KeepsEmptyTail: the node's vacuum of a drained table leaves
// its pages where they are (TRUNCATE false), since truncating takes the
// table's ACCESS EXCLUSIVE lock, which every reserve and ack would wait
// for; it still removes the dead tuples.
func TestVacuum_KeepsEmptyTail(t *testing.T) {
	ctx := context.Background()
	raw := deadTasks(t, 4000, 200)
	if _, err := raw.Exec(ctx, `DELETE FROM hourglass_tasks`); err != nil {
		t.Fatal(err)
	}
	var before int64
	if err := raw.QueryRow(ctx, `SELECT pg_relation_size('hourglass_tasks')`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if before == 0 {
		t.Fatal("the table has no pages before the vacuum")
	}
	// The statistics reach pg_stat_user_tables when the writers' backends
	// report them (about a second); wait for them, boundedly.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var dead int64
		if err := raw.QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables
			WHERE relid = 'hourglass_tasks'::regclass`).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead == 4000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("statistics: %d dead tuples; want 4000", dead)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := &Node{db: &pool{raw: raw, timeout: 5 * time.Second}}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := n.vacuumTasks(1000, 0.1)(pctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	var after, dead int64
	if err := raw.QueryRow(ctx, `SELECT pg_relation_size('hourglass_tasks')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the vacuum took the table from %d to %d bytes; want its pages kept", before, after)
	}
	// The vacuum removed the dead tuples (its backend reports the count,
	// as the writers' do).
	for {
		if err := raw.QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables
			WHERE relid = 'hourglass_tasks'::regclass`).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the vacuum: %d dead tuples; want 0", dead)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
