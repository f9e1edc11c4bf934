package cluster_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hourglass-go/hourglass/cluster"
	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestMigrate applies the migrations to a new database, then again (a
// no-op), and refuses a schema newer than the binary.
func TestMigrate(t *testing.T) {
	url := server(t).CreateDatabase(t)
	pool := pgtest.Pool(t, url, 4)
	ctx := context.Background()
	want := len(cluster.Migrations())
	for i, from := range []int{0, want} {
		f, to, err := cluster.Migrate(ctx, pool)
		if err != nil || f != from || to != want {
			t.Fatalf("Migrate #%d: %d → %d, %v; want %d → %d", i+1, f, to, err, from, want)
		}
	}
	var v, n int
	if err := pool.QueryRow(ctx, "SELECT max(version), count(*) FROM hourglass_migrations").Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	if v != want || n != want {
		t.Fatalf("hourglass_migrations: version %d in %d rows, want %d", v, n, want)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO hourglass_migrations (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cluster.Migrate(ctx, pool); !errors.Is(err, cluster.ErrSchemaNewer) {
		t.Fatalf("Migrate over a newer schema: %v, want ErrSchemaNewer", err)
	}
	if _, err := cluster.Open(ctx, pool, cluster.Options{Node: "n", Logger: quiet}); !errors.Is(err, cluster.ErrSchemaNewer) {
		t.Fatalf("Open over a newer schema: %v, want ErrSchemaNewer", err)
	}
}
