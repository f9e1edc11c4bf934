package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/internal/retry"
)

// TestGiveBacks_Bounded: a node keeps at most maxGiveBacks lost calls to
// give back while its database does not answer; the calls past it, and
// those pending when it closes, are left to their leases' expiry and
// counted; close stops its goroutine.
func TestGiveBacks_Bounded(t *testing.T) {
	// A port nothing listens on: every try fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, err := pgxpool.ParseConfig("postgres://nobody@" + addr + "/none?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	ConfigurePool(cfg)
	raw, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	counter := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}) }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := &giveBacks{
		db: &pool{raw: raw, timeout: time.Second}, readied: func(string, int) {},
		log:   retry.NewFailureLog(log, "failed", "works"),
		calls: counter(), given: counter(), left: counter(),
		quit: make(chan struct{}),
	}
	const extra = 10
	for range maxGiveBacks + extra {
		g.add(g.call([]string{"q"}))
	}
	g.mu.Lock()
	pending := len(g.pending)
	g.mu.Unlock()
	if pending != maxGiveBacks {
		t.Errorf("%d calls pending, want %d", pending, maxGiveBacks)
	}
	if k := value(g.left); k != extra {
		t.Errorf("left = %v with %d calls past the bound, want %d", k, extra, extra)
	}
	g.close()
	if k := value(g.left); k != maxGiveBacks+extra {
		t.Errorf("left = %v after close, want every call (%d)", k, maxGiveBacks+extra)
	}
	if k := value(g.calls); k != maxGiveBacks+extra {
		t.Errorf("calls = %v, want %d", k, maxGiveBacks+extra)
	}
	g.mu.Lock()
	running := g.running
	g.mu.Unlock()
	if running {
		t.Error("the give-back goroutine still runs after close")
	}
}

// TestGiveBacks_RefusedIsFinal: a give-back PostgreSQL refuses (here its
// table does not exist) is not tried again: the call is left to its
// leases' expiry, counted, so that the calls behind it do not wait for
// it until their own leases run out.
func TestGiveBacks_RefusedIsFinal(t *testing.T) {
	url := pgtest.Start(t).CreateDatabase(t) // not migrated: no hourglass_tasks
	counter := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}) }
	g := &giveBacks{
		db: &pool{raw: pgtest.Pool(t, url, 2, ConfigurePool), timeout: 5 * time.Second}, readied: func(string, int) {},
		log:   retry.NewFailureLog(slog.New(slog.NewTextHandler(io.Discard, nil)), "failed", "works"),
		calls: counter(), given: counter(), left: counter(),
		quit: make(chan struct{}),
	}
	defer g.close()
	c := g.call([]string{"q"})
	c.open = true // nothing to end
	g.add(c)
	deadline := time.Now().Add(10 * time.Second)
	for value(g.left) != 1 {
		if time.Now().After(deadline) {
			g.mu.Lock()
			pending := len(g.pending)
			g.mu.Unlock()
			t.Fatalf("a refused give-back: %d pending, %v left after 10 s; want it left at once", pending, value(g.left))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnknownOutcome: an error PostgreSQL answered, or one pgx says came
// before anything was sent, leaves nothing leased; a deadline, a cancel
// or a broken connection after the statement was sent may have.
func TestUnknownOutcome(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"PgError", &pgconn.PgError{Code: "P0001"}, false},
		{"wrapped PgError", errors.Join(errors.New("x"), &pgconn.PgError{Code: "40001"}), false},
		{"deadline", context.DeadlineExceeded, true},
		{"unreachable", &unreachableError{"no answer"}, true},
		{"broken", &net.OpError{Op: "read", Err: errors.New("reset")}, true},
		{"not sent", safeToRetry{}, false},
		{"ctx done", ctx.Err(), true},
	} {
		if got := unknownOutcome(c.err); got != c.want {
			t.Errorf("%s: unknownOutcome(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// safeToRetry is an error pgx would return before sending anything.
type safeToRetry struct{}

func (safeToRetry) Error() string     { return "not sent" }
func (safeToRetry) SafeToRetry() bool { return true }

// value is the value of counter c.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}
