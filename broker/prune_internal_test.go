package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-go/hourglass/store/memstore"
	"github.com/hourglass-go/hourglass/task"
)

// TestPruneHistory_Primitive: the broker's primitive of the history's
// retry.Pruner deletes at most max records older than age, oldest
// first, and says how many; records within age stay; a closed broker
// deletes nothing and fails nothing.
func TestPruneHistory_Primitive(t *testing.T) {
	ctx := context.Background()
	b, err := Open(memstore.New(), Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), History: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := svc(b)
	for i := range 5 {
		id := fmt.Sprint(i)
		if _, _, err := s.Put(ctx, "q", task.PutRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "q", id); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.pruneHistory(ctx, time.Hour, 10); n != 0 || err != nil {
		t.Fatalf("prune of records older than an hour: %d, %v; want none", n, err)
	}
	for _, want := range []int{2, 2, 1, 0} {
		if n, err := b.pruneHistory(ctx, 0, 2); n != want || err != nil {
			t.Fatalf("prune of at most 2: %d, %v; want %d", n, err, want)
		}
	}
	if fs, _, err := s.FinishedTasks(ctx, "q", "", 0, 10); err != nil || len(fs) != 0 {
		t.Fatalf("history after the prunes: %d, %v", len(fs), err)
	}
	b.Close()
	if n, err := b.pruneHistory(ctx, 0, 2); n != 0 || err != nil {
		t.Fatalf("prune on a closed broker: %d, %v", n, err)
	}
}
