package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hourglass-go/hourglass/internal/pgtest"
)

// TestDiagnosis: HOURGLASS_PGTEST_SETTINGS reaches the server (after its
// own settings) and HOURGLASS_PGTEST_LOGDIR keeps its log past Close; a
// malformed setting is refused.
func TestDiagnosis(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOURGLASS_PGTEST_SETTINGS", "log_min_duration_statement=0; work_mem=7MB;log_min_messages=info")
	t.Setenv("HOURGLASS_PGTEST_LOGDIR", dir)
	s, err := pgtest.Launch()
	if err == pgtest.ErrNoBinaries {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	for name, want := range map[string]string{"work_mem": "7MB", "log_min_messages": "info", "log_min_duration_statement": "0"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil || v != want {
			t.Errorf("SHOW %s = %q, %v; want %q", name, v, err, want)
		}
	}
	conn.QueryRow(ctx, "SELECT 'pgtest-diag-marker'").Scan(new(string))
	conn.Close(ctx)
	s.Close()
	logs, _ := filepath.Glob(filepath.Join(dir, "pgtest-*.log"))
	if len(logs) != 1 {
		t.Fatalf("kept logs %v, want one", logs)
	}
	if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), "pgtest-diag-marker") {
		t.Errorf("the kept log does not show the statement:\n%s", b)
	}

	t.Setenv("HOURGLASS_PGTEST_SETTINGS", "log_lock_waits")
	if s, err := pgtest.Launch(); err == nil {
		s.Close()
		t.Fatal("a setting without a value was taken")
	}
}
