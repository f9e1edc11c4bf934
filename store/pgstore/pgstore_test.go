package pgstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/hourglass-go/hourglass/internal/pgtest"
	"github.com/hourglass-go/hourglass/store"
	"github.com/hourglass-go/hourglass/store/pgstore"
	"github.com/hourglass-go/hourglass/store/storetest"
	"github.com/jackc/pgx/v5"
)

// open opens the store at url, failing t on an error.
func open(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return st
}

// TestStore runs the conformance suite over one PostgreSQL server, a new
// database for each case.
func TestStore(t *testing.T) {
	srv := pgtest.Start(t)
	t.Run("Run", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return open(t, srv.CreateDatabase(t)) })
	})
	t.Run("Durable", func(t *testing.T) {
		var mu sync.Mutex
		dbs := map[string]string{} // the suite's dir → a database
		storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
			mu.Lock()
			url, ok := dbs[dir]
			if !ok {
				url = srv.CreateDatabase(t)
				dbs[dir] = url
			}
			mu.Unlock()
			return open(t, url)
		})
	})
}

// TestCommit_SurvivesServerCrash: a batch whose Commit returned is there
// after the server is killed with SIGKILL and restarted.
func TestCommit_SurvivesServerCrash(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDatabase(t)
	st := open(t, url)
	var b store.Batch
	for job := uint64(1); job <= 100; job++ {
		b.Put(store.Task{JobID: job, Queue: "q", ID: string(rune('A'+job%26)) + string(rune('a'+job/26)), State: store.Waiting, Payload: []byte{byte(job)}})
	}
	if err := st.Commit(&b); err != nil {
		t.Fatal(err)
	}
	st.Close()
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	st = open(t, url)
	defer st.Close()
	n := 0
	if err := st.Recover(func(store.Task) error { n++; return nil }); err != nil || n != 100 {
		t.Fatalf("after SIGKILL: %d tasks, %v; want 100", n, err)
	}
}

// TestMigrate: migrating twice changes nothing, the version is recorded,
// and a database ahead of the binary is refused.
func TestMigrate(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDatabase(t)
	st := open(t, url)
	st.Close()
	st = open(t, url)
	st.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v, n int
	if err := conn.QueryRow(ctx, "SELECT max(version), count(*) FROM hourglass_migrations").Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	if want := len(pgstore.Migrations()); v != want || n != want {
		t.Fatalf("hourglass_migrations: version %d in %d rows, want %d", v, n, want)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO hourglass_migrations (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(ctx, url); err == nil {
		t.Fatal("Open over a schema newer than the binary: nil error")
	}
}
