package riverbench_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/benchmarks/river"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestCompare runs both sides over a throwaway PostgreSQL server: by
// default one tiny round, so that the comparison keeps compiling and
// running; with HOURGLASS_RIVERBENCH=1 the full sizes (100k pending,
// 1000/s due for 20 s), printing the markdown table. These variables
// change the full run:
//
//	HOURGLASS_RIVERBENCH_PENDING=1000000
//	HOURGLASS_RIVERBENCH_RATE=5000      jobs/s falling due
//	HOURGLASS_RIVERBENCH_SECONDS=20     length of the stream
//	HOURGLASS_RIVERBENCH_NODES=1        hourglass nodes and river clients
//	HOURGLASS_RIVERBENCH_ROUNDS=3       rounds, each side once per round
func TestCompare(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Set("max_connections", "400"))
	cfg := riverbench.Config{Pending: 2000, Rate: 200, Duration: time.Second}
	full, _ := strconv.ParseBool(os.Getenv("HOURGLASS_RIVERBENCH"))
	if full {
		env := func(name string) int {
			n, _ := strconv.Atoi(os.Getenv("HOURGLASS_RIVERBENCH_" + name))
			return n
		}
		cfg = riverbench.Config{
			Pending: env("PENDING"), Rate: env("RATE"), Duration: time.Duration(env("SECONDS")) * time.Second,
			Nodes: env("NODES"), Rounds: env("ROUNDS"),
		}
	}
	res, err := riverbench.Compare(context.Background(), func() string { return srv.CreateDatabase(t) }, cfg,
		func(line string) { t.Log(line) })
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Table())
	for _, s := range append(res.Hourglass, res.River...) {
		if s.Early > 0 {
			t.Errorf("%s: %d jobs delivered early", s.System, s.Early)
		}
		if s.Delivered != s.Due {
			t.Errorf("%s: %d of %d jobs delivered", s.System, s.Delivered, s.Due)
		}
	}
}
