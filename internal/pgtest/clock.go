package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Clock is a test's hold on a cluster database's clock, hourglass_now()
// (package cluster's migration 002: the database server's wall clock in
// Unix ns, which every statement of a node reads), made to run ahead by
// an offset that only the test moves: ShiftClock installs it, Advance
// moves it forward. A node's own timers stay on its process's clock and
// follow the database's through its offset measure, late by up to the
// offset moved until then (cluster/clock.go): what only the statements'
// arithmetic decides, a rate limit's bucket for instance, sees the move
// at once.
type Clock struct {
	url string
}

// sqlShiftClock replaces hourglass_now() by the same clock plus the
// offset of a one-row table it makes. It is run only by ShiftClock, never
// by a migration: a database of a test, after the node's migrations made
// the function.
const sqlShiftClock = `CREATE TABLE hourglass_test_clock (
		one boolean PRIMARY KEY DEFAULT true CHECK (one),
		offset_ns bigint NOT NULL);
	INSERT INTO hourglass_test_clock VALUES (true, 0);
	CREATE OR REPLACE FUNCTION hourglass_now() RETURNS bigint
		LANGUAGE sql VOLATILE PARALLEL SAFE
		AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint
			+ (SELECT offset_ns FROM hourglass_test_clock) $$;`

// ShiftClock makes hourglass_now() of the database at url, whose
// migrations a cluster node ran already, run ahead by an offset that
// starts at 0 and that the Clock returned moves. One statement each
// (ShiftClock, Advance), on a connection of their own.
func ShiftClock(t testing.TB, url string) *Clock {
	t.Helper()
	c := &Clock{url: url}
	c.exec(t, sqlShiftClock)
	return c
}

// Advance moves the database's clock forward by d.
func (c *Clock) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	c.exec(t, "UPDATE hourglass_test_clock SET offset_ns = offset_ns + $1", int64(d))
}

// exec runs one statement on a connection of its own, within 30 s.
func (c *Clock) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		t.Fatalf("hourglass: pgtest: the database's clock: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("hourglass: pgtest: the database's clock: %v", err)
	}
}
